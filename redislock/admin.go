package redislock

import (
	"context"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Inspect implements driver.Backend: a mutex or writer in one round trip,
// readers and permits in a second, and one or two more for the warnings
// (see the package documentation).
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(key); err != nil {
		return driver.Info{}, err
	}
	k := b.keys.Get(key)
	st, err := redisnode.Inspect(ctx, b.rdb, k)
	if err != nil {
		return driver.Info{}, err
	}
	info := driver.Info{Held: st.Held, Token: st.Token, TTL: st.TTL, Meta: st.Meta}
	if st.Held {
		info.Holds = st.Holds
		if st.Writer {
			info.Kind = driver.Write
		}
	} else {
		readers, permits, err := redisnode.InspectLeases(ctx, b.rdb, k)
		if err != nil {
			return driver.Info{}, err
		}
		for kind, ls := range map[driver.Kind]redisnode.Leases{driver.Read: readers, driver.Permit: permits} {
			if ls.Count > 0 {
				info = driver.Info{Held: true, Kind: kind, Token: ls.Newest, TTL: ls.TTL, Holds: ls.Count}
				if kind == driver.Permit {
					info.Limit = ls.Limit
				}
			}
		}
	}
	info.Warnings = b.warnings(ctx, k)
	return info, nil
}

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
