// Package keylist builds the answer of driver.Backend.List for backends
// that find the names of their keys first and then describe each.
package keylist

import (
	"context"

	"github.com/distlock-go/distlock/driver"
)

// Held describes each of keys with inspect, in order, and returns the
// held ones. The first error ends it.
func Held(ctx context.Context, keys []string, inspect func(context.Context, string) (driver.Info, error)) ([]driver.KeyInfo, error) {
	var list []driver.KeyInfo
	for _, key := range keys {
		info, err := inspect(ctx, key)
		if err != nil {
			return nil, err
		}
		if info.Held {
			list = append(list, driver.KeyInfo{Key: key, Info: info})
		}
	}
	return list, nil
}
