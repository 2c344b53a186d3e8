package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Acquire implements driver.Backend. It sends the acquire script to every
// master at once and succeeds if a quorum granted the lock and the lease is
// still valid: TTL - elapsed - drift > 0, with elapsed measured from the
// start of the round that won (see below). Grant.ValidFor is TTL - drift,
// which the caller counts from the start of its call, so that the lease
// it trusts ends no later than that deadline.
//
// It stops waiting as soon as the replies so far decide the outcome. On
// failure it releases the lock on every node that granted it, failed or
// did not answer, then:
//   - a vote that nobody won although no other owner can be shown to hold
//     a quorum (a split vote between contenders) is tried again, within
//     ctx, after a random pause: up to splitRounds rounds, each pause
//     drawn from a window twice as wide as the last (see splitPause);
//   - a vote refused by a quorum held by one other owner, or split in
//     every round, reports the lock not obtained (nil error);
//   - a vote that the restart guard decided (it holds new grants back on
//     too many nodes for a quorum) reports it Guarded, with RetryAfter
//     the time until enough of them grant;
//   - a quorum of nodes that refuse the request for the key's kind gives a
//     [*driver.KindError];
//   - too many failed nodes for a quorum, whatever the others say, give a
//     [*QuorumError].
//
// The fencing token is the largest token of the granting nodes, written back
// to them first when they disagree; see the package documentation.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.check(ctx); err != nil {
		return driver.Grant{}, err
	}
	if err := req.Validate(b.Capabilities()); err != nil { // mutexes only
		return driver.Grant{}, fmt.Errorf("redlock: %w", err)
	}
	validFor, err := b.validity(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	k := b.keys.Get(req.Key)
	desc := redisnode.Describe(req.Meta)
	var probed uint64 // nodes probed in an earlier round (see cast)
	for round := 1; ; round++ {
		start := b.now()
		v, gateWait, gated := b.cast(ctx, req, k, desc, probed)
		if gated {
			return driver.Grant{RetryAfter: gateWait}, nil
		}
		switch d, guardWait := b.judge(ctx, req, k, v); d {
		case won:
			return b.confirm(ctx, req, k, v, start, validFor)
		case split, blocked:
			// A split vote: other contenders hold the nodes this one
			// missed, and it holds (or may hold) what they miss. Its
			// minority frees nothing anyone waits for, so it goes back
			// quietly; the next round comes after a random pause, so that
			// the losers of the vote do not collide again. (Blocked: the
			// pending releases settle meanwhile.)
			b.abandon(ctx, k, req, v, redisnode.WakeNone)
			probed |= v.probed
			attempt := b.now().Sub(start)
			if round < splitRounds && b.sleep(ctx, splitPause(attempt, round)) {
				continue
			}
			if d == blocked {
				return driver.Grant{}, b.quorumError("acquire", req.Key, v.rs)
			}
			return driver.Grant{RetryAfter: splitPause(attempt, 1)}, nil
		case refused:
			b.abandon(ctx, k, req, v, redisnode.WakeToken)
			return driver.Grant{RetryAfter: minHolderTTL(v.rs)}, nil
		case guardHeld:
			b.abandon(ctx, k, req, v, redisnode.WakeToken)
			return driver.Grant{RetryAfter: guardWait, Guarded: true}, nil
		case wrongKind:
			b.abandon(ctx, k, req, v, redisnode.WakeToken)
			return driver.Grant{}, v.kindError(req)
		default: // failed
			b.abandon(ctx, k, req, v, redisnode.WakeToken)
			return driver.Grant{}, b.quorumError("acquire", req.Key, v.rs)
		}
	}
}

// splitRounds is how many rounds one Acquire gives a vote that keeps
// splitting (see splitPause).
const splitRounds = 8

// ballot is one round of an acquisition: the request sent to the nodes and
// what each answered.
type ballot struct {
	rs     []reply // by node; see mark for the nodes that gave no reply
	fo     *fanout // the round's requests, the gate's excepted
	asked  uint64  // nodes sent the acquire script, the gate included (0: blocked)
	late   uint64  // asked nodes whose replies the outcome did not wait for
	probed uint64  // nodes sent a probe instead

	granted, refused, failed int
	wrongKind                int // refusals for the key's kind, among refused
}

// verdict is what a round's ballot decides.
type verdict uint8

const (
	won       verdict = iota // a quorum granted the lock
	refused                  // another owner holds a quorum, or there is no time left to find out
	split                    // nobody can be shown to hold a quorum: worth another round
	blocked                  // too few nodes were free of this owner's pending releases to ask
	guardHeld                // the restart guard holds back too many nodes for a quorum
	wrongKind                // a quorum refused the request for the key's kind
	failed                   // too many nodes failed for a quorum, whatever the others said
)

// cast runs one round of an acquisition. A waiter woken by a release first
// asks the key's gate node alone (see gate): of the waiters woken together,
// only the one the gate grants asks the other nodes. If the gate refuses,
// cast reports gated, with how long to wait for the holder.
//
// Nodes where a release of this owner may still be pending are not asked
// (see pendingSet); they are probed instead. Nor are the nodes probed in an
// earlier round of the same call: a probe answered vouches for the older
// release only once the owner's next call comes, as it would without
// rounds. If too few nodes remain for a quorum, only the probes go out.
func (b *Backend) cast(ctx context.Context, req driver.Request, k redisnode.Keys, desc string, probed uint64) (v *ballot, wait time.Duration, gated bool) {
	owner, ttl := req.Owner, req.TTL
	v = &ballot{rs: make([]reply, len(b.nodes))}
	skip, probes := b.pending.blocked(req.Key, owner)
	skip |= probed
	v.probed = probes
	ask := b.all &^ skip
	if count(ask) < b.quorum {
		ask = 0
	}
	v.asked = ask
	var gate uint64
	if probes == 0 && ask != 0 {
		if g, ok := b.gate(req.Key, ask); ok {
			gctx, cancel := context.WithTimeout(ctx, b.timeout(ttl))
			// Refused, the attempt enlists this client at the gate, if it
			// hears the gate's releases: the next release there wakes the
			// client enlisted first, not every waiter. While this client
			// yields on the gate's lock to a client its release woke, the
			// attempt only enlists it, and it waits out the yield.
			client, yielding := b.gateClient(k, g)
			token, holderTTL, err := acquireOn(gctx, b.nodes[g].rdb, k, owner, ttl, desc, req.Reentry, client)
			cancel()
			switch {
			case err == nil && token == 0 && yielding > 0:
				return nil, yielding, true
			case err == nil && token == 0:
				// Held: the holder's release wakes this waiter, or, if no
				// release is heard, it asks every node after gateStale.
				// Enlisted (client), it is woken by name, also when it was
				// refused while the last holder yields to a client woken
				// before it: only the fallback is timed.
				b.gateRefused(req.Key)
				if holderTTL == 0 || client != "" && holderTTL < gateStale {
					holderTTL = gateStale
				}
				return nil, holderTTL, true
			case err == nil:
				gate = 1 << g
				v.rs[g] = reply{node: g, ok: true, token: token}
				v.granted = 1
			}
			// On an error every node is asked, the gate again: an
			// acquisition is idempotent per owner.
		}
	}
	if probes != 0 {
		b.pending.begin(req.Key, owner, probes)
	}
	v.fo = b.fan(ctx, b.timeout(ttl), (ask&^gate)|probes, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		if ask&(1<<i) == 0 {
			b.probe(ctx, rdb, k, req.Key, owner, i, redisnode.WakeNone)
			return reply{node: i, err: errPending}
		}
		token, holderTTL, err := acquireOn(ctx, rdb, k, owner, ttl, desc, req.Reentry, "")
		r := reply{node: i, ok: err == nil && token > 0, token: token, ttl: holderTTL, err: err}
		var guarded *redisnode.GuardError
		switch {
		case errors.Is(err, driver.ErrKindMismatch):
			r.kind, r.err = err, nil // a refusal, never a grant
		case errors.As(err, &guarded):
			// A refusal by the node's restart guard: judge's survey asks
			// the refusing nodes how long their guards hold grants back.
			r.ttl, r.err = guarded.Wait, nil
		}
		return r
	})
	v.failed = count(b.all &^ ask)
	tolerated := len(b.nodes) - b.quorum // failures a quorum survives
	silent := ask &^ gate
	waiting := v.fo.collect(silent, func(r reply) bool {
		silent &^= 1 << r.node
		v.rs[r.node] = r
		switch {
		case r.ok:
			v.granted++
		case r.err == nil:
			v.refused++
			if r.kind != nil {
				v.wrongKind++
			}
		default:
			v.failed++
		}
		// Every granting node's token counts, so a grant waits for all
		// of them; no quorum stops as soon as the cause is known: too
		// many failures, or refusals with failures a quorum would
		// survive whatever the silent nodes turn out to be.
		noQuorum := v.granted+count(silent) < b.quorum &&
			(v.failed > tolerated || (v.refused > 0 && v.failed+count(silent) <= tolerated))
		return !noQuorum
	})
	if v.fo.expired {
		v.failed += count(waiting) // silent past the timeout
	}
	v.late = waiting
	b.mark(v.rs, waiting, skip, v.fo.silence())
	for i := range v.rs {
		if ask == 0 && skip&(1<<i) == 0 {
			v.rs[i] = reply{node: i, err: errTooFew}
		}
	}
	return v, 0, false
}

// judge decides what ballot v of req means, and for a vote the restart
// guard holds back, how long until it lets enough nodes grant. Refusals
// decide only when the failed nodes alone would have left a quorum
// possible; then, when the refusing nodes are too many for a quorum
// without them, they are asked who holds the lock (see survey): the lock
// is refused if one other owner holds a quorum of the nodes, guarded if
// the restart guard holds back too many nodes for any quorum, and the
// vote is split otherwise.
func (b *Backend) judge(ctx context.Context, req driver.Request, k redisnode.Keys, v *ballot) (verdict, time.Duration) {
	tolerated := len(b.nodes) - b.quorum
	switch {
	case v.granted >= b.quorum:
		return won, 0
	case v.asked == 0:
		return blocked, 0
	case v.refused == 0 || v.failed > tolerated:
		return failed, 0
	case v.wrongKind >= b.quorum:
		return wrongKind, 0
	case ctx.Err() != nil:
		return refused, 0
	case v.refused <= tolerated:
		return split, 0
	}
	most, guarded := b.survey(ctx, req, k, v)
	switch {
	case most >= b.quorum:
		return refused, 0
	case len(guarded) > tolerated:
		// The guards must lift on all but tolerated of them.
		slices.Sort(guarded)
		return guardHeld, guarded[len(guarded)-tolerated-1]
	}
	return split, 0
}

// survey asks the nodes that refused v, within one node timeout, who holds
// the lock, and those that hold it for nobody how long their restart guard
// holds new grants back. It returns how many of them the most frequent
// other owner holds, and the guards' waits. A node that does not say
// counts for nobody.
func (b *Backend) survey(ctx context.Context, req driver.Request, k redisnode.Keys, v *ballot) (most int, guarded []time.Duration) {
	var refusing uint64
	for _, r := range v.rs {
		if !r.ok && r.err == nil && r.kind == nil {
			refusing |= 1 << r.node
		}
	}
	g := b.guard()
	owners := make([]string, len(b.nodes))
	waits := make([]time.Duration, len(b.nodes))
	fo := b.fan(ctx, b.timeout(req.TTL), refusing, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		// Written before the reply is handed over, read only after.
		st, err := redisnode.Inspect(ctx, rdb, k)
		if err == nil && st.Held {
			owners[i] = st.Owner
		} else if err == nil {
			waits[i], err = redisnode.GuardWait(ctx, rdb, k, g)
		}
		return reply{node: i, ok: err == nil, err: err}
	})
	held := map[string]int{}
	fo.collect(refusing, func(r reply) bool {
		switch o := owners[r.node]; {
		case !r.ok:
		case o != "" && o != req.Owner:
			held[o]++
			most = max(most, held[o])
		case waits[r.node] > 0:
			guarded = append(guarded, waits[r.node])
		}
		return most < b.quorum
	})
	return most, guarded
}

// kindError is the error of a ballot refused by a quorum for the key's
// kind: the first refusing node's, about req's key.
func (v *ballot) kindError(req driver.Request) error {
	for _, r := range v.rs {
		if r.kind == nil {
			continue
		}
		var ke *driver.KindError
		if errors.As(r.kind, &ke) {
			e := *ke
			e.Key, e.Asked = req.Key, req.Kind
			return &e
		}
		return fmt.Errorf("redlock: %q: %w", req.Key, r.kind)
	}
	return fmt.Errorf("redlock: %q: %w", req.Key, driver.ErrKindMismatch)
}

// confirm completes a round that won v: it settles the fencing token and
// checks that the lease is still valid, giving the lock back if not.
func (b *Backend) confirm(ctx context.Context, req driver.Request, k redisnode.Keys, v *ballot, start time.Time, validFor time.Duration) (driver.Grant, error) {
	token, agreed := fenceToken(v.rs)
	if !agreed {
		if err := b.fence(ctx, k, req, token, v.rs, start.Add(validFor), b.timeout(req.TTL)); err != nil {
			b.abandon(ctx, k, req, v, redisnode.WakeToken)
			return driver.Grant{}, err
		}
	}
	if elapsed := b.now().Sub(start); elapsed >= validFor {
		b.abandon(ctx, k, req, v, redisnode.WakeToken)
		return driver.Grant{}, fmt.Errorf("%w: %q: quorum took %v of a %v lease (drift allowance %v); released",
			ErrValidityExpired, req.Key, elapsed, req.TTL, req.TTL-validFor)
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: validFor}, nil
}

// sleep waits for d, and reports false without waiting if ctx ends first
// or would end before d has passed, or the backend is closed.
func (b *Backend) sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-b.stop:
	}
	return false
}

// acquireOn runs the acquire script on one node: the re-entrant one when
// reentry is set. client is the id to enlist if refused (see
// redisnode.AcquireRedlock), or "".
func acquireOn(ctx context.Context, rdb redis.UniversalClient, k redisnode.Keys, owner string, ttl time.Duration, desc, reentry, client string) (uint64, time.Duration, error) {
	if reentry != "" {
		return redisnode.AcquireReentrant(ctx, rdb, k, owner, ttl, desc, reentry)
	}
	return redisnode.AcquireRedlock(ctx, rdb, k, owner, ttl, desc, client)
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

// splitPause returns how long the loser of a split vote waits before its
// next round, having taken attempt to find out, after round rounds (from
// 1): half an attempt plus a random time within a window of two attempts
// that doubles with every round up to 32 attempts (randomised exponential
// back-off), at least 100µs. Spread over several attempts' length, the
// losers' next rounds seldom overlap, so the first of them usually takes
// every node and the others find it held; the window grows for as long as
// they collide.
func splitPause(attempt time.Duration, round int) time.Duration {
	attempt = max(attempt, 100*time.Microsecond)
	window := 2 * attempt << min(max(round-1, 0), 4)
	return attempt/2 + rand.N(window)
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

// abandon releases the lock of a failed round v of req on every node asked
// that may hold it: those that granted it, failed, or had not answered
// (late), detached from ctx, which may be what ended the attempt, and
// within one node timeout each. It waits for the nodes that answered the
// round, not for the late ones. The releases wake the waiters as wake
// says.
//
// A late node's release is sent once the round's request to it has
// finished: sent at once, on another connection, it could reach the node
// first, find nothing to delete, and leave the late grant to hold the node
// for the whole lease. A late node that refuses needs no release.
//
// A release whose outcome is unknown may still run on its node later, and
// would then delete a grant that a later attempt of the same owner counted.
// Each node is therefore blocked for this owner (see pendingSet) until its
// release is known to have run, or never to have left this process.
func (b *Backend) abandon(ctx context.Context, k redisnode.Keys, req driver.Request, v *ballot, wake redisnode.Wake) {
	key, owner := req.Key, req.Owner
	var targets uint64
	for _, r := range v.rs {
		if r.ok || r.err != nil {
			targets |= 1 << r.node
		}
	}
	targets &= v.asked
	if targets == 0 {
		return
	}
	b.pending.begin(key, owner, targets)
	bg := context.WithoutCancel(ctx)
	timeout := b.timeout(req.TTL)
	fo := v.fo
	if late := v.late & targets; late != 0 {
		fo.then(late, func(i int) {
			if r := fo.res[i]; r.err == nil && !r.ok {
				b.pending.end(key, owner, i, true) // refused: nothing to give back
				return
			}
			rctx, cancel := context.WithTimeout(bg, timeout)
			defer cancel()
			b.probe(rctx, b.nodes[i].rdb, k, key, owner, i, wake)
		})
	}
	now := targets &^ v.late
	if now == 0 {
		return
	}
	rel := b.fan(bg, timeout, now, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		b.probe(ctx, rdb, k, key, owner, i, wake)
		return reply{node: i}
	})
	rel.collect(now, func(reply) bool { return true })
}
