package distlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Lock is a held lease on one key, returned by [Mutex.Lock] and
// [Mutex.TryLock]. Its methods are safe for concurrent use.
//
// The lease ends when it is unlocked, when a renewal is refused (someone
// else holds the key now), or when its local deadline passes without a
// confirmed renewal. At that moment [Lock.Done] closes and [Lock.Err] says
// why. Work done under the lock should stop then: use [Lock.Context].
type Lock struct {
	d     *desc
	lease driver.Lease
	token uint64

	ctxs ctxSet // told when the lease ends

	mu  sync.Mutex
	err error // why the lease ended; nil while held
	// done is closed when the lease ends; made by the first Done, as most
	// handles are unlocked without anyone asking for it.
	done chan struct{}
	ttl  time.Duration
	// floor is the shortest TTL of a renewal (or acquisition attempt)
	// whose outcome is unknown, 0 if none: the store may still apply it,
	// after any later one, and cut the lease to that TTL. Deadlines are
	// computed as if every later renewal had asked for at most floor.
	floor       time.Duration
	validFor    time.Duration // the validity the last confirmed renewal granted
	validUntil  time.Time
	nextRenew   time.Time     // zero without auto-refresh
	timer       *time.Timer   // runs tick at the next renewal or the deadline
	renewal     chan struct{} // non-nil while a renewal is in flight; closed when it ends
	renewing    context.CancelFunc
	unlocked    bool
	lapsing     bool // UnlockAt is setting the lease's end: no more watchdog renewals
	lostForSure bool // the backend said the key is not ours

	obs *observed // nil when nothing observes the lock
}

// startLock returns the handle of a fresh grant, made by the call cl. It
// costs no goroutine: one timer wakes it for each renewal and at the
// deadline. ambiguous reports that an attempt before the grant had an
// unknown outcome. It returns nil if the client was closed: the caller
// gives the grant back.
func startLock(ctx context.Context, d *desc, lease driver.Lease, start time.Time, g driver.Grant, ambiguous bool, cl *call) *Lock {
	l := &Lock{
		d:     d,
		lease: lease,
		token: g.Token,
		ttl:   d.opts.ttl,
	}
	if !d.c.held.add(l) {
		return nil
	}
	l.obs = cl.holding()
	if ambiguous {
		l.floor = d.opts.ttl
	}
	l.mu.Lock()
	l.confirmedLocked(start, g.ValidFor)
	if !l.nextRenew.IsZero() && shortGrant(g, l.ttl) {
		l.nextRenew = start // renew it at once
	}
	l.reportLocked(ctx, EventAcquired, func(e *Event) { e.ValidFor = g.ValidFor })
	l.timer = time.AfterFunc(time.Until(l.nextEventLocked()), l.tick)
	l.unlockAndReport()
	if g.Lost != nil {
		done := l.Done()
		go func() {
			select {
			case <-g.Lost:
				l.markLost()
			case <-done:
			}
		}()
	}
	return l
}

// Key returns the name of the lock.
func (l *Lock) Key() string { return l.d.key }

// Token returns the fencing token of this holding. It is strictly greater
// than the token of every earlier holding of the same key, so a resource
// that remembers the highest token it has seen can reject writes from a
// holder whose lease has ended (see package fence). The holds of one
// re-entrant lease share their token (see [OwnerID]).
func (l *Lock) Token() uint64 { return l.token }

// Done returns a channel that is closed when the lease ends: on Unlock,
// when it is lost, or when it expires. [Lock.Err] then says which.
func (l *Lock) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.err != nil {
			close(l.done)
		}
	}
	return l.done
}

// Err returns nil while the lease is held; afterwards [ErrLockReleased],
// [ErrLockLost] or [ErrLockExpired] (which also matches ErrLockLost).
func (l *Lock) Err() error {
	l.mu.Lock()
	l.expireLocked(time.Now()) // its timer may not have run yet
	err := l.err
	l.unlockAndReport()
	return err
}

// Context returns a context derived from parent that is cancelled when the
// lease ends, with [Lock.Err] as its cause ([context.Cause]). Run the work
// the lock protects under it. The handle forgets the context as soon as
// parent ends, so deriving one per request of a long-held lock is fine.
func (l *Lock) Context(parent context.Context) context.Context {
	return l.ctxs.derive(parent)
}

// ValidUntil returns the local deadline of the lease, on the monotonic
// clock: the start of the acquisition (or of the last confirmed renewal)
// plus the TTL, less the backend's clock drift allowance (and less the
// difference to a shorter TTL whose renewal had an unknown outcome, see
// [Lock.Refresh]). Past it the lease is treated as lost even if the server
// would still honour it.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Refresh extends the lease to ttl from now and makes ttl the lease length
// for later automatic renewals. It returns [ErrLockLost] if the key is no
// longer held by this handle (the handle then ends), the handle's error if
// it has ended, also while the renewal was on its way (an ended handle
// stays ended: nothing changes), and a wrapped backend error otherwise (the
// lease is then unchanged and may still be renewed).
//
// Renewals of one handle are sent one at a time, so that the store applies
// them in the order their outcomes are recorded: Refresh waits for a
// renewal in flight (the watchdog's or another Refresh) to finish first,
// or for ctx to end. When a renewal's outcome is unknown (an error other
// than ErrLockLost), the store may still apply it later; from then on
// [Lock.ValidUntil] is computed as if no renewal asked for more than that
// renewal's TTL, which only makes the deadline earlier and the watchdog
// more frequent.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := validTTL(ttl, nil); err != nil {
		return err
	}
	for { // claim the one renewal slot
		if err := ctx.Err(); err != nil { // not sent: its outcome is known
			return fmt.Errorf("distlock: refresh %q: %w", l.d.key, err)
		}
		l.mu.Lock()
		if err := l.endedLocked(time.Now()); err != nil {
			l.unlockAndReport()
			return err
		}
		busy := l.renewal
		if busy == nil {
			l.renewal = make(chan struct{})
			// A reply after the deadline is worthless (the handle has
			// ended): do not keep the slot, or the caller, past it.
			rctx, cancel := context.WithDeadline(ctx, l.validUntil)
			l.unlockAndReport()
			defer cancel()
			return l.renew(rctx, ttl)
		}
		l.unlockAndReport()
		select {
		case <-busy:
		case <-l.Done():
		case <-ctx.Done():
		}
	}
}

// renew sends one renewal with ttl and records its outcome. The caller has
// claimed the renewal slot (l.renewal); renew frees it.
func (l *Lock) renew(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	valid, err := l.d.c.backend.Refresh(ctx, l.lease, ttl)

	l.mu.Lock()
	defer l.unlockAndReport()
	close(l.renewal)
	l.renewal, l.renewing = nil, nil
	notHeld := isNotHeld(err)
	if notHeld {
		l.lostForSure = true
	} else if err != nil && (l.floor == 0 || ttl < l.floor) {
		l.floor = ttl
	}
	now := time.Now()
	if ended := l.endedLocked(now); ended != nil {
		return ended
	}
	switch {
	case notHeld:
		l.endLocked(ctx, ErrLockLost, LossRefused, nil)
		return ErrLockLost
	case err != nil:
		l.reportLocked(ctx, EventRenewalFailed, func(e *Event) { e.Latency, e.Err = now.Sub(start), err })
		if !l.nextRenew.IsZero() && !now.Before(l.nextRenew) {
			// A due renewal failed: try again soon, while the lease lasts.
			l.nextRenew = now.Add(min(l.interval(l.validFor), max(l.validUntil.Sub(now)/4, time.Millisecond)))
		}
		l.timer.Reset(l.nextEventLocked().Sub(now))
		if longTTLRefused(err, ttl) {
			return fmt.Errorf("%w: refresh %q with TTL %v: %w; %s", ErrInvalidTTL, l.d.key, ttl, err, longTTLAdvice)
		}
		return fmt.Errorf("distlock: refresh %q: %w", l.d.key, err)
	}
	if l.floor > 0 && l.floor < ttl {
		valid -= ttl - l.floor // see floor; drift only grows with the TTL
	}
	l.ttl = ttl
	l.confirmedLocked(start, valid)
	if !now.Before(l.validUntil) { // confirmed too late to be worth anything
		l.endLocked(ctx, ErrLockExpired, LossExpired, nil)
		return ErrLockExpired
	}
	l.reportLocked(ctx, EventRenewed, func(e *Event) { e.Latency, e.ValidFor = now.Sub(start), valid })
	l.timer.Reset(l.nextEventLocked().Sub(now))
	return nil
}

// shortGrant reports whether g is valid for much less than the ttl asked
// for, as a lease a release handed over to a waiter is (it lasts the
// waiter's place in line): the holder extends it at once.
func shortGrant(g driver.Grant, ttl time.Duration) bool {
	return g.ValidFor < ttl/2
}

// confirmedLocked records a grant or renewal that started at start and is
// valid for valid, and schedules the next renewal within a third of that
// validity. l may also be a handle not shared yet.
func (l *Lock) confirmedLocked(start time.Time, valid time.Duration) {
	l.validFor = valid
	l.validUntil = start.Add(valid)
	if l.d.opts.autoRefresh && !l.lapsing {
		l.nextRenew = start.Add(l.interval(valid))
	}
}

// endedLocked returns why the handle has ended, or nil while it is held.
// A lease past its deadline ends here even if the timer has not run yet.
func (l *Lock) endedLocked(now time.Time) error {
	l.expireLocked(now)
	switch {
	case l.err != nil:
		return l.err
	case l.unlocked:
		return ErrLockReleased
	}
	return nil
}

// expireLocked ends a lease that is past its deadline at now and not being
// released.
func (l *Lock) expireLocked(now time.Time) {
	if l.err == nil && !l.unlocked && !now.Before(l.validUntil) {
		l.endLocked(context.Background(), ErrLockExpired, LossExpired, nil)
	}
}

// Unlock releases the lock and ends the handle. It returns nil when the
// lock was released, [ErrLockLost] (or [ErrLockExpired]) if the lease had
// already ended, and [ErrLockReleased] on a second call. It never deletes a
// lock that another holder took over. The release runs detached from ctx:
// a ctx that is already done, or is cancelled while the release is in
// flight, does not stop it. A release whose outcome is unknown (a lost
// reply, a busy or briefly unreachable server) is repeated until the
// backend confirms it, for at most [WithReleaseTimeout] or until ctx's
// deadline, whichever is later. If the backend cannot be reached in that
// time, Unlock returns the backend's error and the lock expires on its
// own after its TTL.
// Done closes when Unlock returns, or at the lease's deadline if the
// release takes longer than that. The hold of a re-entrant lock releases
// only itself: the lock stays held while the owner has other holds (see
// [OwnerID]).
func (l *Lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	if l.unlocked {
		l.unlockAndReport()
		return ErrLockReleased
	}
	prior := l.endedLocked(time.Now()) // a lease past its deadline has ended
	l.unlocked = true
	// The timer stays set to the deadline: a release that outlasts the
	// lease must not keep Done open past it (see tick).
	l.timer.Reset(time.Until(l.validUntil))
	if l.renewing != nil {
		l.renewing() // its outcome no longer matters
	}
	lost := l.lostForSure
	l.unlockAndReport()

	var err error
	if !lost { // an expired lease may still be ours on the server: clean up
		err = l.d.release(ctx, l.lease)
	}
	switch {
	case prior != nil:
		err = prior
	case isNotHeld(err):
		err = ErrLockLost
	case err != nil:
		err = fmt.Errorf("distlock: release %q: %w", l.d.key, err)
	}
	l.mu.Lock()
	l.endLocked(ctx, ErrLockReleased, 0, err)
	l.timer.Stop()
	l.unlockAndReport()
	return err
}

// UnlockAt lets the lease lapse at t instead of releasing the lock now:
// one renewal sets the lease to end at t, the watchdog stops, and the
// handle ends as by Unlock (Done closes; Err reports [ErrLockReleased]).
// The key stays held, by no one, until t; then it is free without a
// release. It is for work that must not run again before t, such as a
// scheduled job that finished sooner than the schedulers' clocks may
// disagree: UnlockAt(ctx, nextRun.Add(-margin)) keeps the other schedulers
// from running the same tick.
//
// If t is less than [MinTTL] away, UnlockAt is Unlock. If the renewal
// fails, the handle stays held and renewed as before and UnlockAt returns
// the error ([ErrLockLost] if the lease is gone). A t further away than
// the backend's maximum lease fails the renewal the same way.
func (l *Lock) UnlockAt(ctx context.Context, t time.Time) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	d := time.Until(t)
	if d < MinTTL {
		return l.Unlock(ctx)
	}
	l.mu.Lock()
	if err := l.endedLocked(time.Now()); err != nil {
		l.unlockAndReport()
		return err
	}
	l.lapsing, l.nextRenew = true, time.Time{}
	l.unlockAndReport()

	err := l.Refresh(ctx, d)

	l.mu.Lock()
	defer l.unlockAndReport()
	l.lapsing = false
	if err != nil {
		if l.err == nil && !l.unlocked && l.d.opts.autoRefresh {
			now := time.Now()
			l.nextRenew = now // renew soon: the watchdog was held off
			l.timer.Reset(l.nextEventLocked().Sub(now))
		}
		return err
	}
	if l.err != nil || l.unlocked { // ended, or unlocked, while renewing
		return ErrLockReleased
	}
	l.unlocked = true
	l.endLocked(ctx, ErrLockReleased, 0, nil)
	l.timer.Stop()
	return nil
}

// endLocked ends the lease with reason, ErrLockReleased or a loss for
// cause; the first reason wins. released is the error of the release that
// ended it, for ErrLockReleased.
func (l *Lock) endLocked(ctx context.Context, reason error, cause LossCause, released error) {
	if l.err != nil {
		return
	}
	l.err = reason
	l.d.c.held.remove(l)
	l.ctxs.end(reason) // before Done closes: whoever it wakes finds them ended
	if l.done != nil {
		close(l.done)
	}
	if reason == ErrLockReleased {
		l.reportLocked(ctx, EventReleased, func(e *Event) { e.Err = released })
	} else {
		l.reportLocked(ctx, EventLost, func(e *Event) { e.Cause, e.Err = cause, reason })
	}
}

// tick runs on the timer: it ends the lease at its deadline and, with
// auto-refresh, renews it when due. While a renewal is in flight the timer
// is set to the deadline, so a backend that does not answer (a paused
// server, a client that ignores ctx deadlines) cannot hold the deadline back;
// the renewal reschedules the timer when it returns.
func (l *Lock) tick() {
	l.mu.Lock()
	now := time.Now()
	if l.unlocked && !now.Before(l.validUntil) {
		// Unlock is still waiting for the release: the lease has run
		// out meanwhile, and Done says so now, not when the reply comes.
		l.endLocked(context.Background(), ErrLockExpired, LossExpired, nil)
	}
	if l.endedLocked(now) != nil {
		l.unlockAndReport()
		return
	}
	if l.nextRenew.IsZero() || l.renewal != nil || now.Before(l.nextRenew) {
		l.timer.Reset(l.nextEventLocked().Sub(now))
		l.unlockAndReport()
		return
	}
	l.renewal = make(chan struct{})
	ctx, cancel := context.WithDeadline(context.Background(), l.validUntil)
	l.renewing = cancel
	ttl := l.ttl
	l.timer.Reset(l.validUntil.Sub(now))
	l.unlockAndReport()

	_ = l.renew(ctx, ttl) // timer callbacks run in their own goroutine
	cancel()
}

// nextEventLocked is when tick must run next.
func (l *Lock) nextEventLocked() time.Time {
	if !l.nextRenew.IsZero() && l.renewal == nil && l.nextRenew.Before(l.validUntil) {
		return l.nextRenew
	}
	return l.validUntil
}

// markLost ends the lease because the backend said the key is not ours.
func (l *Lock) markLost() {
	l.mu.Lock()
	defer l.unlockAndReport()
	l.lostForSure = true
	l.expireLocked(time.Now()) // past the deadline, the lease expired first: say so, whatever the timer's delay
	if !l.unlocked {           // a loss that raced with Unlock must not relabel it
		l.endLocked(context.Background(), ErrLockLost, LossReported, nil)
	}
}

// interval is the renewal period after a renewal that granted valid: the
// configured interval, but never more than a third of valid, so that two
// more attempts fit before the deadline.
func (l *Lock) interval(valid time.Duration) time.Duration {
	if iv := l.d.opts.refreshInterval; iv > 0 && iv < valid/3 {
		return iv
	}
	return valid / 3
}

// registered reports how many contexts and hooks the handle keeps.
func (l *Lock) registered() int { return l.ctxs.len() }
