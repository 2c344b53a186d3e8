package redislock

import (
	"context"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// List implements driver.Backend by scanning the keys under the backend's
// prefix (every master's, on a Cluster) and inspecting each lock found.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	names, err := redisnode.Names(ctx, b.rdb, b.prefix, prefix)
	if err != nil {
		return nil, err
	}
	return keylist.Held(ctx, names, b.Inspect)
}

// Break implements driver.Backend: Inspect, then one script that deletes
// the holdings and wakes the waiters.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	info, err := b.Inspect(ctx, key)
	if err != nil {
		return driver.Info{}, err
	}
	if _, err := redisnode.Break(ctx, b.rdb, b.keys.Get(key)); err != nil {
		return driver.Info{}, err
	}
	return info, nil
}
