package memlock

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

func init() { distlock.Register("mem", OpenURL) }

// Stores opened by URL, by name.
var named struct {
	sync.Mutex
	stores map[string]*Backend
}

// OpenURL returns the store a "mem://[name]" URL names, made on first use:
// "mem://" and "mem://jobs" are two stores, each shared by every client
// that opens the same URL in this process. distlock.Open calls it for the
// scheme "mem".
func OpenURL(_ context.Context, u *url.URL) (driver.Backend, error) {
	if u == nil {
		return nil, fmt.Errorf("memlock: nil URL: %w", distlock.ErrInvalidURL)
	}
	named.Lock()
	defer named.Unlock()
	if named.stores == nil {
		named.stores = make(map[string]*Backend)
	}
	name := u.Host + u.Path
	b := named.stores[name]
	if b == nil {
		b = New()
		named.stores[name] = b
	}
	return b, nil
}
