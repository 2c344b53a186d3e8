package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Acquire implements driver.Backend. It sends the acquire script to every
// master at once and succeeds if a quorum granted the lock and the lease is
// still valid: TTL - elapsed - drift > 0, with elapsed measured from the
// start of the call. Grant.ValidFor is TTL - drift, counted (by the caller)
// from the start of the attempt, so that start+ValidFor is that deadline.
//
// It stops waiting as soon as the replies so far decide the outcome. On
// failure it releases the lock on every node that granted it, failed or did
// not answer, then reports the lock not obtained (nil error) if a node
// refused and the failed nodes alone would have left a quorum possible —
// the lock is held, or being taken, elsewhere — and a [*QuorumError]
// otherwise: too many nodes failed for a quorum, whatever the others say.
//
// The fencing token is the largest token of the granting nodes, written back
// to them first when they disagree; see the package documentation.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.check(ctx); err != nil {
		return driver.Grant{}, err
	}
	if req.Kind != driver.Exclusive || req.Fair {
		return driver.Grant{}, fmt.Errorf("redlock: mutexes only (kind %d, fair %v): %w",
			req.Kind, req.Fair, errors.ErrUnsupported)
	}
	validFor, err := b.validity(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	start := b.now()
	k := b.keys.Get(req.Key)
	desc := redisnode.Describe(req.Meta)
	owner, ttl := req.Owner, req.TTL
	// Nodes where a release of this owner may still be pending are not
	// asked (see pendingSet); they are probed instead. If too few nodes
	// remain for a quorum, only the probes go out.
	skip, probes := b.pending.blocked(req.Key, owner)
	ask := b.all &^ skip
	if count(ask) < b.quorum {
		ask = 0
	}
	rs := make([]reply, len(b.nodes))
	granted := 0
	// A waiter woken by a release first asks the key's gate node alone
	// (see gate): of the waiters woken together, only the one the gate
	// grants asks the other nodes.
	var gated uint64
	if probes == 0 && ask != 0 {
		if g, ok := b.gate(req.Key, ask); ok {
			gctx, cancel := context.WithTimeout(ctx, b.timeout(ttl))
			token, holderTTL, err := acquireOn(gctx, b.nodes[g].rdb, k, owner, ttl, desc, req.Reentry)
			cancel()
			switch {
			case err == nil && token == 0:
				// Held: the holder's release wakes this waiter, or, if no
				// release is heard, it asks every node after gateStale.
				b.gateRefused(req.Key)
				if holderTTL == 0 {
					holderTTL = gateStale
				}
				return driver.Grant{RetryAfter: holderTTL}, nil
			case err == nil:
				gated = 1 << g
				rs[g] = reply{node: g, ok: true, token: token}
				granted = 1
			}
			// On an error every node is asked, the gate again: an
			// acquisition is idempotent per owner.
		}
	}
	if probes != 0 {
		b.pending.begin(req.Key, owner, probes)
	}
	fo := b.fan(ctx, b.timeout(ttl), (ask&^gated)|probes, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		if ask&(1<<i) == 0 {
			b.probe(ctx, rdb, k, req.Key, owner, i, redisnode.WakeNone)
			return reply{node: i, err: errPending}
		}
		token, holderTTL, err := acquireOn(ctx, rdb, k, owner, ttl, desc, req.Reentry)
		return reply{node: i, ok: err == nil && token > 0, token: token, ttl: holderTTL, err: err}
	})
	refused, failed := 0, count(b.all&^ask)
	tolerated := len(b.nodes) - b.quorum // failures a quorum survives
	silent := ask &^ gated
	waiting := fo.collect(silent, func(r reply) bool {
		silent &^= 1 << r.node
		rs[r.node] = r
		switch {
		case r.ok:
			granted++
		case r.err == nil:
			refused++
		default:
			failed++
		}
		// Every granting node's token counts, so a grant waits for all
		// of them; no quorum stops as soon as the cause is known: too
		// many failures, or refusals with failures a quorum would
		// survive whatever the silent nodes turn out to be.
		noQuorum := granted+count(silent) < b.quorum &&
			(failed > tolerated || (refused > 0 && failed+count(silent) <= tolerated))
		return !noQuorum
	})
	if fo.expired {
		failed += count(waiting) // silent past the timeout
	}
	b.mark(rs, waiting, skip, fo.silence())
	for i := range rs {
		if ask == 0 && skip&(1<<i) == 0 {
			rs[i] = reply{node: i, err: errTooFew}
		}
	}

	if granted < b.quorum {
		// Nodes not waited for may have granted too.
		split := (granted > 0 || waiting != 0) && refused > 0 && failed <= tolerated && ctx.Err() == nil
		wake := redisnode.WakeToken
		if split {
			// A split vote: other contenders hold the nodes this one
			// missed, and it holds (or may hold) what they miss. Its minority frees
			// nothing anyone waits for, so it goes back quietly, and the
			// next try comes after a random pause, so that the losers of
			// the vote do not collide again (see splitPause).
			wake = redisnode.WakeNone
		}
		b.abandon(ctx, k, req.Key, owner, rs, fo, waiting, ask, wake)
		if split {
			return driver.Grant{RetryAfter: splitPause(b.now().Sub(start))}, nil
		}
		if refused > 0 && failed <= tolerated {
			// The failed nodes alone would have left a quorum possible:
			// refusals decided it, so the lock is held (or being taken)
			// elsewhere.
			return driver.Grant{RetryAfter: minHolderTTL(rs)}, nil
		}
		return driver.Grant{}, b.quorumError("acquire", req.Key, rs)
	}
	token, agreed := fenceToken(rs)
	if !agreed {
		if err := b.fence(ctx, k, req, token, rs, start.Add(validFor), b.timeout(ttl)); err != nil {
			b.abandon(ctx, k, req.Key, owner, rs, fo, waiting, ask, redisnode.WakeToken)
			return driver.Grant{}, err
		}
	}
	if elapsed := b.now().Sub(start); elapsed >= validFor {
		b.abandon(ctx, k, req.Key, owner, rs, fo, waiting, ask, redisnode.WakeToken)
		return driver.Grant{}, fmt.Errorf("%w: %q: quorum took %v of a %v lease (drift allowance %v); released",
			ErrValidityExpired, req.Key, elapsed, ttl, ttl-validFor)
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: validFor}, nil
}

// acquireOn runs the acquire script on one node: the re-entrant one when
// reentry is set.
func acquireOn(ctx context.Context, rdb redis.UniversalClient, k redisnode.Keys, owner string, ttl time.Duration, desc, reentry string) (uint64, time.Duration, error) {
	if reentry != "" {
		return redisnode.AcquireReentrant(ctx, rdb, k, owner, ttl, desc, reentry)
	}
	return redisnode.Acquire(ctx, rdb, k, owner, ttl, desc)
}

// probe sends a release of owner to node i, recorded with pending.begin,
// and records whether it ran. Once one has, any older release of the owner
// there, sent earlier, has had its chance to run too. (Strictly, two
// connections do not order requests: one held back in the network for
// longer than a whole attempt is the residual risk.)
func (b *Backend) probe(ctx context.Context, rdb redis.UniversalClient, k redisnode.Keys, key, owner string, i int, wake redisnode.Wake) {
	_, err := redisnode.ReleaseWaking(ctx, rdb, k, owner, wake)
	b.pending.end(key, owner, i, err == nil || redisnode.NeverSent(err))
}

// mark records an error for the nodes that gave no reply: those still
// waiting when the outcome was decided, and those skipped.
func (b *Backend) mark(rs []reply, waiting, skip uint64, silence error) {
	for i := range rs {
		switch bit := uint64(1) << i; {
		case waiting&bit != 0:
			rs[i] = reply{node: i, err: silence}
		case skip&bit != 0:
			rs[i] = reply{node: i, err: errPending}
		}
	}
}

// fenceToken returns the largest token among the granting nodes, and
// whether every granting node returned it.
func fenceToken(rs []reply) (token uint64, agreed bool) {
	for _, r := range rs {
		if r.ok && r.token > token {
			token = r.token
		}
	}
	agreed = true
	for _, r := range rs {
		if r.ok && r.token != token {
			agreed = false
		}
	}
	return token, agreed
}

// splitPause returns how long the loser of a split vote waits before it
// tries again, having taken attempt to find out: a random time between
// half an attempt and two and a half, at least 100µs. Spread over several
// attempts' length, the losers' next tries seldom overlap, so the first of
// them usually takes every node.
func splitPause(attempt time.Duration) time.Duration {
	attempt = max(attempt, 100*time.Microsecond)
	return attempt/2 + rand.N(2*attempt)
}

func minHolderTTL(rs []reply) time.Duration {
	var least time.Duration
	for _, r := range rs {
		if !r.ok && r.err == nil && r.ttl > 0 && (least == 0 || r.ttl < least) {
			least = r.ttl
		}
	}
	return least
}

var errNotGranting = errors.New("did not grant the lock in this attempt")

// fence raises the counter of every node to at least token and waits until
// a quorum of the nodes that granted the lock confirm it, before deadline
// (the lease's validity) and within one node timeout.
//
// Only granting nodes count: their counter reached token while the lock key
// sat on them, so no later holder's key — made after this one left — can
// have been given a token at or below it there. A node that did not grant
// may already hold another owner's key, made before the seed with an older
// token, which that owner may still count when its next attempt succeeds.
func (b *Backend) fence(ctx context.Context, k redisnode.Keys, req driver.Request, token uint64, rs []reply, deadline time.Time, timeout time.Duration) error {
	key := req.Key
	remaining := deadline.Sub(b.now())
	if remaining <= 0 {
		return fmt.Errorf("%w: %q: no time left to confirm the fencing token", ErrValidityExpired, key)
	}
	var granting uint64
	for _, r := range rs {
		if r.ok {
			granting |= 1 << r.node
		}
	}
	fo := b.fan(ctx, min(timeout, remaining), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		n, err := redisnode.Seed(ctx, rdb, k, token, req.Reentry)
		return reply{node: i, ok: err == nil && n >= token, token: n, err: err}
	})
	fs := make([]reply, len(b.nodes))
	confirmed := 0
	silent := granting // only granting nodes count: another's counter proves nothing
	waiting := fo.collect(granting, func(r reply) bool {
		silent &^= 1 << r.node
		fs[r.node] = r
		if r.ok {
			confirmed++
		} else if r.err == nil {
			fs[r.node].err = fmt.Errorf("counter %d is below the token %d", r.token, token)
		}
		return confirmed < b.quorum && confirmed+count(silent) >= b.quorum
	})
	if confirmed >= b.quorum {
		return nil
	}
	b.mark(fs, waiting, 0, fo.silence())
	for i := range fs {
		if granting&(1<<i) == 0 {
			fs[i] = reply{node: i, err: errNotGranting}
		}
	}
	return b.quorumError("fence", key, fs)
}

// abandon releases the lock of a failed attempt on every node asked that may
// hold it: those that granted it, failed, or had not answered (late), detached
// from ctx, which may be what ended the attempt. It waits for the nodes that
// answered the attempt, not for the late ones. The releases wake the
// waiters as wake says.
//
// A late node's release is sent once the attempt's request to it (in fo)
// has finished: sent at once, on another connection, it could reach the
// node first, find nothing to delete, and leave the late grant to hold the
// node for the whole lease. A late node that refuses needs no release.
//
// A release whose outcome is unknown may still run on its node later, and
// would then delete a grant that a later attempt of the same owner counted.
// Each node is therefore blocked for this owner (see pendingSet) until its
// release is known to have run, or never to have left this process.
func (b *Backend) abandon(ctx context.Context, k redisnode.Keys, key, owner string, rs []reply, fo *fanout, late, asked uint64, wake redisnode.Wake) {
	var targets uint64
	for _, r := range rs {
		if r.ok || r.err != nil {
			targets |= 1 << r.node
		}
	}
	targets &= asked
	if targets == 0 {
		return
	}
	b.pending.begin(key, owner, targets)
	bg := context.WithoutCancel(ctx)
	if late&targets != 0 {
		fo.then(late&targets, func(i int) {
			if r := fo.res[i]; r.err == nil && !r.ok {
				b.pending.end(key, owner, i, true) // refused: nothing to give back
				return
			}
			rctx, cancel := context.WithTimeout(bg, b.releaseTimeout())
			defer cancel()
			b.probe(rctx, b.nodes[i].rdb, k, key, owner, i, wake)
		})
	}
	now := targets &^ late
	if now == 0 {
		return
	}
	rel := b.fan(bg, b.releaseTimeout(), now, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		b.probe(ctx, rdb, k, key, owner, i, wake)
		return reply{node: i}
	})
	rel.collect(now, func(reply) bool { return true })
}
