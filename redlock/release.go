package redlock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Release implements driver.Backend: compare-and-delete, and the wake-up of
// waiters, on every master at once. It waits for every node (at most one
// node timeout), returns nil if a quorum released the lock, a
// [*QuorumError] if failed nodes leave that unknown, and driver.ErrNotHeld
// if too few nodes held the lock for this owner to have held it. A release
// repeated after a lost reply finds the receipts of the first on the nodes
// and reports it again.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	key, owner := l.Key, l.Owner
	k := b.keys.Get(key)
	fo := b.fan(ctx, b.releaseTimeout(), b.all, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		ok, err := redisnode.ReleaseWaking(ctx, rdb, k, owner, redisnode.WakeToken)
		return reply{node: i, ok: ok, err: err}
	})
	rs := make([]reply, len(b.nodes))
	released, notHeld := 0, 0
	waiting := fo.collect(b.all, func(r reply) bool {
		rs[r.node] = r
		switch {
		case r.ok:
			released++
		case r.err == nil:
			notHeld++
		}
		return true
	})
	b.pending.forget(key, owner)
	switch {
	case released >= b.quorum:
		return nil
	case notHeld > len(b.nodes)-b.quorum:
		return driver.ErrNotHeld
	}
	b.mark(rs, waiting, 0, fo.silence())
	return b.quorumError("release", key, rs)
}
