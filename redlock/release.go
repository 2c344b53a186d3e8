package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Release implements driver.Backend: compare-and-delete, and the wake-up of
// waiters, on every master at once. It waits for every node as long as ctx
// allows, up to [MaxDefaultNodeTimeout] (or the node timeout set, if
// longer): a release spends no lease, and a node that stalls for a moment
// must not be left holding the key, shutting others out of it, until its
// TTL ends.
//
// It returns nil once a quorum released the lock and no node's outcome is
// in doubt: each other node released it, did not hold it, or failed with
// an error of its own (down or cut off, its copy of the lock ends with its
// TTL, as a failed node's does in every operation). It returns
// driver.ErrNotHeld if too few nodes held the lock for this owner to have
// held it. Otherwise, and while any node is in doubt (it had not answered
// when ctx ended, or its request timed out: it may yet apply the release,
// or keep the lock), it returns a [*QuorumError] naming the nodes. Calling
// Release again, as package distlock does within its release timeout,
// waits for them longer and settles them: a release repeated after a lost
// reply finds the receipt of the first on the node and reports it again.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("redlock: %w", err)
	}
	key, owner := l.Key, l.Owner
	k := b.keys.Get(key)
	gate := b.gateNode(key)
	// A message for this client on the gate's channel from now on ends
	// the yield that the release may start there.
	mark := b.nodes[gate].notify.Mark(k.Channel)
	fo := b.fan(ctx, b.releaseWait(), b.all, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		var ok bool
		var err error
		if i == gate {
			// The gate wakes the client its refusals enlisted first, if
			// any, and this client yields to it for a moment (see
			// gateClient).
			var yield uint64
			ok, yield, err = redisnode.ReleaseAs(ctx, rdb, k, owner, b.nodes[i].notify.ID())
			if yield != 0 {
				b.yields.Start(k.Channel, yield, mark)
			}
		} else {
			ok, err = redisnode.ReleaseWaking(ctx, rdb, k, owner, redisnode.WakeToken)
		}
		return reply{node: i, ok: ok, err: err}
	})
	rs := make([]reply, len(b.nodes))
	released, notHeld, unknown := 0, 0, 0
	waiting := fo.collect(b.all, func(r reply) bool {
		rs[r.node] = r
		switch {
		case r.ok:
			released++
		case r.err == nil:
			notHeld++
		case inDoubt(r.err):
			unknown++
		}
		return true
	})
	unknown += count(waiting)
	b.pending.forget(key, owner)
	switch {
	case released >= b.quorum && unknown == 0:
		return nil
	case notHeld > len(b.nodes)-b.quorum:
		return driver.ErrNotHeld
	}
	b.mark(rs, waiting, 0, fo.silence())
	return b.quorumError("release", key, rs)
}

// inDoubt reports whether err, a node's error, leaves it unknown whether
// the request ran or will run: it timed out, or was cut short by its
// context, after it may have been sent.
func inDoubt(err error) bool {
	if redisnode.NeverSent(err) {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrNodeTimeout) ||
		errors.As(err, &ne) && ne.Timeout()
}
