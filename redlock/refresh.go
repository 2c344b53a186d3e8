package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Refresh implements driver.Backend: compare-and-PEXPIRE on every master at
// once, successful when a quorum extended the lease within its validity
// (ttl - elapsed - drift > 0). It returns ttl - drift, counted from the
// start of the call, and driver.ErrNotHeld once enough nodes say the lock
// is not this owner's that no quorum can hold it.
//
// It returns as soon as a quorum has extended the lease, but the renewal
// goes to every master: the requests to the others run on, detached from
// ctx and bounded by the node timeout, so that the lease is extended on
// every master that answers in time even if the caller ends ctx at once.
// Nodes that lost the key (a restart, an eviction) while a quorum kept it
// get it back, with a fresh acquire, so that the lock again tolerates as
// many failures as it should.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("redlock: %w", err)
	}
	key, owner := l.Key, l.Owner
	validFor, err := b.validity(ttl)
	if err != nil {
		return 0, err
	}
	start := b.now()
	k := b.keys.Get(key)
	skip, _ := b.pending.blocked(key, owner)
	// A grant's lease keeps its fencing token on the node until the clock
	// floor has passed it (see AcquireRedlock): a renewal never cuts it
	// shorter than that. The nodes may keep a short lease a little longer
	// than ttl; the validity still counts ttl.
	keep := max(ttl, redisnode.RedlockMinLease(TokenGrain))
	fo := b.fanDetached(ctx, b.timeout(ttl), b.all&^skip, b.quorum, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		ok, err := redisnode.Refresh(ctx, rdb, k, owner, keep)
		return reply{node: i, ok: ok, err: err}
	})
	rs := make([]reply, len(b.nodes))
	held, lost := 0, uint64(0)
	silent := b.all &^ skip
	awaited := silent
	if count(silent) < b.quorum {
		awaited = 0 // too few nodes to count: decided already
	}
	waiting := silent &^ awaited
	waiting |= fo.collect(awaited, func(r reply) bool {
		silent &^= 1 << r.node
		rs[r.node] = r
		switch {
		case r.ok:
			held++
		case r.err == nil:
			lost |= 1 << r.node
		}
		// Decided: a quorum extended it, or too few nodes are left for one.
		return held < b.quorum && held+count(silent) >= b.quorum
	})
	if held >= b.quorum {
		if elapsed := b.now().Sub(start); elapsed >= validFor {
			return 0, fmt.Errorf("%w: %q: refresh took %v of a %v lease (drift allowance %v)",
				ErrValidityExpired, key, elapsed, ttl, ttl-validFor)
		}
		if lost != 0 {
			b.reseed(ctx, k, owner, ttl, lost)
		}
		return validFor, nil
	}
	if count(lost) > len(b.nodes)-b.quorum {
		return 0, driver.ErrNotHeld
	}
	b.mark(rs, waiting, skip, fo.silence())
	return 0, b.quorumError("refresh", key, rs)
}

// reseed takes the lock again on the nodes in lost, where it is free. It is
// best effort and bounded by one node timeout: the lease does not depend
// on it.
func (b *Backend) reseed(ctx context.Context, k redisnode.Keys, owner string, ttl time.Duration, lost uint64) {
	fo := b.fan(ctx, b.timeout(ttl), lost, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		token, _, err := redisnode.AcquireRedlock(ctx, rdb, k, owner, ttl, "", "")
		return reply{node: i, ok: token > 0, err: err}
	})
	fo.collect(lost, func(reply) bool { return true })
}
