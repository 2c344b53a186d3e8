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
	m     *Mutex
	owner string
	token uint64

	done chan struct{} // closed when the lease ends

	mu          sync.Mutex
	err         error         // why the lease ended; nil while held
	onEnd       []func(error) // cancel the contexts made by Context
	ttl         time.Duration
	validUntil  time.Time
	validSince  time.Time   // start of the attempt that set validUntil
	nextRenew   time.Time   // zero without auto-refresh
	timer       *time.Timer // runs tick at the next renewal or the deadline
	renewing    context.CancelFunc
	unlocked    bool
	lostForSure bool // the backend said the key is not ours
}

// startLock returns the handle of a fresh grant. It costs no goroutine: one
// timer wakes it for each renewal and at the deadline.
func startLock(m *Mutex, owner string, start time.Time, g driver.Grant) *Lock {
	l := &Lock{
		m:          m,
		owner:      owner,
		token:      g.Token,
		ttl:        m.opts.ttl,
		validUntil: start.Add(g.ValidFor),
		validSince: start,
	}
	l.done = make(chan struct{})
	now := time.Now()
	if m.opts.autoRefresh {
		l.nextRenew = start.Add(l.interval())
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(l.nextEvent().Sub(now), l.tick)
	l.mu.Unlock()
	if g.Lost != nil {
		go func() {
			select {
			case <-g.Lost:
				l.markLost()
			case <-l.done:
			}
		}()
	}
	return l
}

// Key returns the name of the lock.
func (l *Lock) Key() string { return l.m.key }

// Token returns the fencing token of this holding. It is strictly greater
// than the token of every earlier holding of the same key, so a resource
// that remembers the highest token it has seen can reject writes from a
// holder whose lease has ended (see package fence).
func (l *Lock) Token() uint64 { return l.token }

// Done returns a channel that is closed when the lease ends: on Unlock,
// when it is lost, or when it expires. [Lock.Err] then says which.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held; afterwards [ErrLockReleased],
// [ErrLockLost] or [ErrLockExpired] (which also matches ErrLockLost).
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Context returns a context derived from parent that is cancelled when the
// lease ends, with [Lock.Err] as its cause ([context.Cause]). Run the work
// the lock protects under it.
func (l *Lock) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		cancel(l.err)
	} else {
		l.onEnd = append(l.onEnd, cancel)
	}
	return ctx
}

// ValidUntil returns the local deadline of the lease, on the monotonic
// clock: the start of the acquisition (or of the last confirmed renewal)
// plus the TTL, less the backend's clock drift allowance. Past it the lease
// is treated as lost even if the server would still honour it.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Refresh extends the lease to ttl from now and makes ttl the lease length
// for later automatic renewals. It returns [ErrLockLost] if the key is no
// longer held by this handle (the handle then ends), the handle's error if
// it has already ended, and a wrapped backend error otherwise (the lease
// is then unchanged and may still be renewed).
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := validTTL(ttl, nil); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	return l.refresh(ctx, ttl)
}

// refresh renews the lease once with ttl and records the new deadline.
func (l *Lock) refresh(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	valid, err := l.m.refresh(ctx, l.owner, ttl)
	if err != nil {
		if isNotHeld(err) {
			l.markLost()
			return ErrLockLost
		}
		return fmt.Errorf("distlock: refresh %q: %w", l.m.key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !start.Before(l.validSince) { // a slower, older renewal must not win
		l.validSince = start
		l.validUntil = start.Add(valid)
		l.ttl = ttl
		if !l.unlocked && l.renewing == nil {
			l.timer.Reset(time.Until(l.nextEvent()))
		}
	}
	return nil
}

// Unlock releases the lock and ends the handle. It returns nil when the
// lock was released, [ErrLockLost] (or [ErrLockExpired]) if the lease had
// already ended, and [ErrLockReleased] on a second call. It never deletes a
// lock that another holder took over. If ctx is already done, Unlock still
// releases, detached from ctx and bounded by [WithReleaseTimeout]. If the
// backend cannot be reached the lock expires on its own after its TTL.
func (l *Lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	if l.unlocked {
		l.mu.Unlock()
		return ErrLockReleased
	}
	l.unlocked = true
	l.timer.Stop()
	if l.renewing != nil {
		l.renewing() // its outcome no longer matters
	}
	lost := l.lostForSure
	l.mu.Unlock()
	prior := l.Err()

	var err error
	if !lost { // an expired lease may still be ours on the server: clean up
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.m.opts.releaseTimeout)
			defer cancel()
		}
		err = l.m.release(ctx, l.owner)
	}
	l.mu.Lock()
	l.end(ErrLockReleased)
	l.mu.Unlock()
	switch {
	case prior != nil:
		return prior
	case isNotHeld(err):
		return ErrLockLost
	case err != nil:
		return fmt.Errorf("distlock: release %q: %w", l.m.key, err)
	}
	return nil
}

// end ends the lease with reason; the first reason wins. l.mu is held.
func (l *Lock) end(reason error) {
	if l.err != nil {
		return
	}
	l.err = reason
	close(l.done)
	for _, cancel := range l.onEnd {
		cancel(reason)
	}
	l.onEnd = nil
}

// tick runs on the timer: it ends the lease at its deadline and, with
// auto-refresh, renews it when due. While a renewal is in flight the timer
// is set to the deadline, so a backend that does not answer (a paused
// server, a client that ignores ctx deadlines) cannot hold the deadline back.
func (l *Lock) tick() {
	l.mu.Lock()
	if l.unlocked || l.err != nil {
		l.mu.Unlock()
		return
	}
	now := time.Now()
	if !now.Before(l.validUntil) {
		l.end(ErrLockExpired)
		l.mu.Unlock()
		return
	}
	if l.nextRenew.IsZero() || l.renewing != nil || now.Before(l.nextRenew) {
		l.timer.Reset(l.nextEvent().Sub(now))
		l.mu.Unlock()
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), l.validUntil)
	l.renewing = cancel
	ttl := l.ttl
	l.timer.Reset(l.validUntil.Sub(now))
	l.mu.Unlock()

	err := l.refresh(ctx, ttl) // timer callbacks run in their own goroutine
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewing = nil
	if l.unlocked || l.err != nil {
		return
	}
	now = time.Now()
	next := l.interval()
	if err != nil { // transient: try again soon, while the lease lasts
		next = min(next, max(l.validUntil.Sub(now)/4, time.Millisecond))
	}
	l.nextRenew = now.Add(next)
	l.timer.Reset(l.nextEvent().Sub(now))
}

// nextEvent is when tick must run next. l.mu is held.
func (l *Lock) nextEvent() time.Time {
	if !l.nextRenew.IsZero() && l.renewing == nil && l.nextRenew.Before(l.validUntil) {
		return l.nextRenew
	}
	return l.validUntil
}

// markLost ends the lease because the backend said the key is not ours.
func (l *Lock) markLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lostForSure = true
	if !l.unlocked { // a renewal that raced with Unlock must not relabel it
		l.end(ErrLockLost)
	}
}

// interval is the renewal period: a third of the TTL unless configured.
// l.mu is held, or l is not shared yet.
func (l *Lock) interval() time.Duration {
	if d := l.m.opts.refreshInterval; d > 0 {
		return d
	}
	return l.ttl / 3
}
