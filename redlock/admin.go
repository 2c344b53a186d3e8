package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// List implements driver.Backend: it scans every master for the locks
// under the backend's prefix and inspects each one found (held means held
// by a quorum). It fails if fewer than a quorum of masters could be
// scanned, since it might miss a held lock.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		names []string
	)
	rs, ok := b.everyNode(ctx, listTimeout, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		found, err := redisnode.Names(ctx, rdb, b.prefix, prefix)
		mu.Lock()
		names = append(names, found...)
		mu.Unlock()
		return reply{node: i, ok: err == nil, err: err}
	})
	if !ok {
		return nil, b.quorumError("list", prefix, rs)
	}
	mu.Lock()
	slices.Sort(names)
	names = slices.Compact(names)
	mu.Unlock()
	return keylist.Held(ctx, names, b.Inspect)
}

// Break implements driver.Backend: Inspect, then the holdings are deleted
// on every master, waiting for each as long as ctx allows (at most 5s when
// ctx has no deadline). It fails if fewer than a quorum of masters
// confirmed: the lock may then still be held.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	info, err := b.Inspect(ctx, key)
	if err != nil {
		return driver.Info{}, err
	}
	k := b.keys.Get(key)
	rs, ok := b.everyNode(ctx, untimed(ctx), func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		_, err := redisnode.Break(ctx, rdb, k)
		return reply{node: i, ok: err == nil, err: err}
	})
	if !ok {
		return driver.Info{}, b.quorumError("break", key, rs)
	}
	return info, nil
}

// listTimeout bounds a List's scan of one master, which may hold many keys.
const listTimeout = time.Minute

// everyNode runs f on every master and waits for all of them, for at most
// timeout. It reports whether a quorum succeeded.
func (b *Backend) everyNode(ctx context.Context, timeout time.Duration, f op) ([]reply, bool) {
	fo := b.fan(ctx, timeout, b.all, 0, f)
	rs := make([]reply, len(b.nodes))
	oks := 0
	waiting := fo.collect(b.all, func(r reply) bool {
		rs[r.node] = r
		if r.ok {
			oks++
		}
		return true
	})
	if oks < b.quorum {
		b.mark(rs, waiting, 0, fo.silence())
		return rs, false
	}
	return rs, true
}
