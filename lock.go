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

	life    context.Context // cancelled, with the reason as cause, when the lease ends
	endLife context.CancelCauseFunc
	stopWD  context.CancelFunc // stops the watchdog; its context derives from life
	wdDone  chan struct{}      // closed when the watchdog goroutine returns
	moved   chan struct{}      // the deadline moved: the watchdog re-arms

	mu          sync.Mutex
	ttl         time.Duration
	validUntil  time.Time
	validSince  time.Time // start of the attempt that set validUntil
	unlocked    bool
	lostForSure bool // the backend said the key is not ours
}

func startLock(m *Mutex, owner string, start time.Time, g driver.Grant) *Lock {
	l := &Lock{
		m:          m,
		owner:      owner,
		token:      g.Token,
		wdDone:     make(chan struct{}),
		moved:      make(chan struct{}, 1),
		ttl:        m.opts.ttl,
		validUntil: start.Add(g.ValidFor),
		validSince: start,
	}
	l.life, l.endLife = context.WithCancelCause(context.Background())
	var wctx context.Context
	wctx, l.stopWD = context.WithCancel(l.life)
	go l.watchdog(wctx, g.Lost)
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
func (l *Lock) Done() <-chan struct{} { return l.life.Done() }

// Err returns nil while the lease is held; afterwards [ErrLockReleased],
// [ErrLockLost] or [ErrLockExpired] (which also matches ErrLockLost).
func (l *Lock) Err() error {
	if l.life.Err() == nil {
		return nil
	}
	return context.Cause(l.life)
}

// Context returns a context derived from parent that is cancelled when the
// lease ends, with [Lock.Err] as its cause ([context.Cause]). Run the work
// the lock protects under it.
func (l *Lock) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(l.life, func() { cancel(context.Cause(l.life)) })
	context.AfterFunc(ctx, func() { stop() })
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
	if err := l.refresh(ctx, ttl); err != nil {
		return err
	}
	select {
	case l.moved <- struct{}{}:
	default:
	}
	return nil
}

// refresh renews the lease once with ttl and records the new deadline.
func (l *Lock) refresh(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	valid, err := l.m.c.backend.Refresh(ctx, l.m.key, l.owner, ttl)
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
	l.mu.Unlock()

	l.stopWD()
	<-l.wdDone
	prior := l.Err()
	l.mu.Lock()
	lost := l.lostForSure
	l.mu.Unlock()

	var err error
	if !lost { // an expired lease may still be ours on the server: clean up
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.m.opts.releaseTimeout)
			defer cancel()
		}
		err = l.m.c.backend.Release(ctx, l.m.key, l.owner)
	}
	l.end(ErrLockReleased)
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

// end ends the lease with reason; the first reason wins.
func (l *Lock) end(reason error) { l.endLife(reason) }

// watchdog ends the lease at its deadline and, with auto-refresh, renews it
// before that. It returns when the lease ends or Unlock stops it. A renewal
// runs in its own goroutine so that a backend which does not answer (a
// paused server, a client that ignores ctx deadlines) cannot hold the
// deadline back.
func (l *Lock) watchdog(ctx context.Context, lost <-chan struct{}) {
	defer close(l.wdDone)
	deadline := time.NewTimer(time.Until(l.ValidUntil()))
	defer deadline.Stop()
	var (
		renew    *time.Timer
		renewC   <-chan time.Time
		inFlight chan error // non-nil while a renewal runs
	)
	if l.m.opts.autoRefresh {
		renew = time.NewTimer(l.interval())
		defer renew.Stop()
		renewC = renew.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			l.markLost()
			return
		case <-l.moved:
			deadline.Reset(time.Until(l.ValidUntil()))
		case <-deadline.C:
			if until := time.Until(l.ValidUntil()); until > 0 { // moved meanwhile
				deadline.Reset(until)
				continue
			}
			l.end(ErrLockExpired)
			return
		case <-renewC:
			renewC = nil
			inFlight = make(chan error, 1)
			go func(done chan<- error) {
				rctx, cancel := context.WithDeadline(ctx, l.ValidUntil())
				defer cancel()
				done <- l.refresh(rctx, l.currentTTL())
			}(inFlight)
		case err := <-inFlight:
			inFlight = nil
			if l.Err() != nil { // refused: the lease is gone
				return
			}
			next := l.interval()
			if err == nil {
				deadline.Reset(time.Until(l.ValidUntil()))
			} else {
				// Transient: try again soon, while the lease lasts.
				next = min(next, max(time.Until(l.ValidUntil())/4, time.Millisecond))
			}
			renew.Reset(next)
			renewC = renew.C
		}
	}
}

// markLost ends the lease because the backend said the key is not ours.
func (l *Lock) markLost() {
	l.mu.Lock()
	unlocked := l.unlocked
	l.lostForSure = true
	l.mu.Unlock()
	if !unlocked { // a renewal that raced with Unlock must not relabel it
		l.end(ErrLockLost)
	}
}

func (l *Lock) currentTTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// interval is the renewal period: a third of the TTL unless configured.
func (l *Lock) interval() time.Duration {
	if d := l.m.opts.refreshInterval; d > 0 {
		return d
	}
	return l.currentTTL() / 3
}
