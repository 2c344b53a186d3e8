package distlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// reportValidity makes f report the validity validFor(ttl) for every
// grant and confirmed renewal, as a backend with a large drift allowance
// or a slow multi-node round does.
func reportValidity(f *fault, validFor func(ttl time.Duration) time.Duration) {
	f.acquire = func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		g, err := next(ctx, req)
		if g.Acquired {
			g.ValidFor = validFor(req.TTL)
		}
		return g, err
	}
	f.refresh = func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
		valid, err := next(ctx, l, ttl)
		if err == nil {
			valid = validFor(ttl)
		}
		return valid, err
	}
}

// serverDeadline returns a lower bound of when the store lets key's lease
// run out.
func serverDeadline(t *testing.T, b driver.Backend, key string) time.Time {
	t.Helper()
	before := time.Now()
	info, err := b.Inspect(context.Background(), key)
	if err != nil || !info.Held {
		t.Fatalf("Inspect: %+v, %v; want the key held", info, err)
	}
	return before.Add(info.TTL)
}

func within(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRenewalsAppliedInOrder: a renewal with a short TTL that reaches the
// store after one with a longer TTL leaves the store with the short lease;
// the handle must never claim more than that.
func TestRenewalsAppliedInOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		watchdog bool // the held-back renewal is the watchdog's, not a Refresh
		lost     bool // its reply is lost at once; the store applies it later
	}{
		{name: "refresh overtakes refresh"},
		{name: "refresh overtakes watchdog", watchdog: true},
		{name: "lost reply applied late", lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const short, long = 2 * time.Second, 6 * time.Second
			held, release, applied := make(chan struct{}), make(chan struct{}), make(chan struct{})
			overtook := make(chan struct{}, 1)
			b := memFault()
			var delayed atomic.Bool
			b.refresh = func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
				if ttl != short || !delayed.CompareAndSwap(false, true) { // only the first short one is delayed
					if ttl == long {
						overtook <- struct{}{}
					}
					return next(ctx, l, ttl)
				}
				close(held)
				deliver := func() (time.Duration, error) {
					<-release
					defer close(applied)
					return next(context.WithoutCancel(ctx), l, ttl) // it is on the wire already
				}
				if tc.lost {
					go func() { _, _ = deliver() }()
					return 0, errors.New("reply lost")
				}
				return deliver()
			}
			opts := []distlock.Option{distlock.WithTTL(short)}
			if !tc.watchdog {
				opts = append(opts, distlock.WithoutAutoRefresh())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := distlock.New(b, opts...).Mutex("k").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(ctx)
			if !tc.watchdog {
				go func() { _ = l.Refresh(ctx, short) }()
			}
			within(t, held, 5*time.Second, "the short renewal")
			second := make(chan error, 1)
			go func() { second <- l.Refresh(ctx, long) }()
			select { // give the long renewal the chance to overtake
			case <-overtook:
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
			within(t, applied, 5*time.Second, "the short renewal to reach the store")
			if err := <-second; err != nil {
				t.Fatalf("Refresh(%v): %v", long, err)
			}
			if over := l.ValidUntil().Sub(serverDeadline(t, b.Backend, "k")); over > 50*time.Millisecond {
				t.Errorf("ValidUntil is %v past the store's deadline for the lease", over)
			}
		})
	}
}

// TestRefreshOnEndedHandle: a handle that ended stays ended, also when it
// ends while a renewal is on its way back.
func TestRefreshOnEndedHandle(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(l *distlock.Lock) // ends the handle while the reply is held
		want error
	}{
		{"unlocked", func(l *distlock.Lock) { _ = l.Unlock(context.Background()) }, distlock.ErrLockReleased},
		{"expired", func(l *distlock.Lock) { <-l.Done() }, distlock.ErrLockExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 200 * time.Millisecond
			held, release := make(chan struct{}), make(chan struct{})
			b := memFault()
			b.refresh = func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
				valid, err := next(ctx, l, ttl) // applied by the store; the reply is slow
				close(held)
				<-release
				return valid, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := distlock.New(b, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex("k").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			refreshed := make(chan error, 1)
			go func() { refreshed <- l.Refresh(ctx, time.Minute) }()
			within(t, held, 5*time.Second, "the renewal")
			tc.end(l)
			deadline := l.ValidUntil()
			close(release)
			if err := <-refreshed; !errors.Is(err, tc.want) {
				t.Errorf("Refresh that returned after the handle ended: %v; want %v", err, tc.want)
			}
			if got := l.ValidUntil(); !got.Equal(deadline) {
				t.Errorf("ValidUntil moved by %v on an ended handle", got.Sub(deadline))
			}
			if !errors.Is(l.Err(), tc.want) {
				t.Errorf("Err() = %v; want %v", l.Err(), tc.want)
			}
			if err := l.Refresh(ctx, time.Minute); !errors.Is(err, tc.want) {
				t.Errorf("Refresh on the ended handle: %v; want %v", err, tc.want)
			}
		})
	}
}

// TestRenewalScheduleFollowsValidity: the watchdog's next renewal is due
// within a third of the validity the last renewal confirmed, whatever the
// configured interval or the TTL of an explicit Refresh.
func TestRenewalScheduleFollowsValidity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ttl      time.Duration
		opts     []distlock.Option
		validFor func(ttl time.Duration) time.Duration
		refresh  time.Duration // an explicit Refresh right after Lock, if set
	}{
		// The interval is shorter than the TTL but not than the validity.
		{name: "interval past validity", ttl: time.Second, opts: []distlock.Option{distlock.WithRefreshInterval(990 * time.Millisecond)},
			validFor: func(ttl time.Duration) time.Duration { return ttl - driver.DefaultDrift(ttl) }},
		{name: "refresh with a shorter TTL", ttl: 6 * time.Second, refresh: time.Second},
		// A renewal confirms less than the acquisition did (a slow
		// multi-node round): the schedule follows the renewal.
		{name: "renewal confirms less", ttl: 2 * time.Second,
			validFor: func() func(time.Duration) time.Duration {
				var calls atomic.Int32
				return func(ttl time.Duration) time.Duration {
					if calls.Add(1) == 1 {
						return ttl
					}
					return ttl / 4
				}
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := memFault()
			if tc.validFor != nil {
				reportValidity(b, tc.validFor)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := distlock.New(b, append(tc.opts, distlock.WithTTL(tc.ttl))...).Mutex("k").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(ctx)
			if tc.refresh > 0 {
				if err := l.Refresh(ctx, tc.refresh); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(2 * time.Second) // past each lease's validity: only renewals due within it keep it
			if err := l.Err(); err != nil {
				t.Fatalf("lease ended under a live holder with the watchdog on: %v", err)
			}
		})
	}
}

// TestUnlockAtKeepsTheKeyUntilThen: the handle ends, the key stays held
// until the given time and is free after it, with no release.
func TestUnlockAtKeepsTheKeyUntilThen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(30*time.Second))
	l, err := c.Mutex("tick").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Second)
	if err := l.UnlockAt(ctx, until); err != nil {
		t.Fatalf("UnlockAt: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done still open after UnlockAt")
	}
	if !errors.Is(l.Err(), distlock.ErrLockReleased) {
		t.Errorf("Err after UnlockAt: %v; want ErrLockReleased", l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("Unlock after UnlockAt: %v; want ErrLockReleased", err)
	}
	info, err := c.Inspect(ctx, "tick")
	if err != nil || info.TTL > time.Second || (!info.Held && time.Now().Before(until)) {
		t.Errorf("Inspect after UnlockAt: %+v, %v; want held until the lapse, for at most 1s", info, err)
	}
	if time.Now().Before(until) {
		if l2, err := c.Mutex("tick").TryLock(ctx); err == nil {
			if time.Now().Before(until) {
				t.Error("TryLock before the lapse was granted")
			}
			_ = l2.Unlock(ctx)
		}
	}
	// Free after the lapse: a waiter gets it soon after until.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := c.Mutex("tick").Lock(wctx)
	if err != nil {
		t.Fatalf("Lock after the lapse: %v", err)
	}
	if time.Now().Before(until) {
		t.Errorf("granted %v before the lapse", time.Until(until))
	}
	_ = l2.Unlock(ctx)
}

// TestUnlockAtInThePastUnlocks, and on a lost lease reports the loss.
func TestUnlockAtEdges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store)
	l, err := c.Mutex("past").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UnlockAt(ctx, time.Now().Add(-time.Minute)); err != nil {
		t.Fatalf("UnlockAt in the past: %v", err)
	}
	if info, _ := c.Inspect(ctx, "past"); info.Held {
		t.Error("UnlockAt in the past left the key held; want it released")
	}

	l, err = c.Mutex("broken").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store.Expire("broken")
	if err := l.UnlockAt(ctx, time.Now().Add(time.Minute)); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("UnlockAt of a lost lease: %v; want ErrLockLost", err)
	}
	//lint:ignore SA1012 testing that a nil context is rejected
	if err := l.UnlockAt(nil, time.Now()); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("UnlockAt(nil): %v; want ErrInvalidArgument", err)
	}
}

// TestUnlockAtStopsTheWatchdog: the watchdog renews nothing after UnlockAt,
// so a short lapse is not extended to the TTL by a renewal in flight.
func TestUnlockAtStopsTheWatchdog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(2*time.Second), distlock.WithRefreshInterval(20*time.Millisecond))
	l, err := c.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several watchdog renewals
	if err := l.UnlockAt(ctx, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if info, err := c.Inspect(ctx, "busy"); err != nil || info.Held {
		t.Errorf("1s after a 300ms lapse: %+v, %v; want free", info, err)
	}
}

// TestDoneClosesAtDeadlineDuringSlowUnlock: a release that outlasts the
// lease must not keep Done open past ValidUntil; code working under
// Lock.Context in another goroutine has to stop at the deadline.
func TestDoneClosesAtDeadlineDuringSlowUnlock(t *testing.T) {
	// The release takes until hold is closed, like one sent to a paused
	// server.
	hold := make(chan struct{})
	b := &fault{Backend: memlock.New(), release: func(ctx context.Context, l driver.Lease, next releaseFunc) error {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return next(ctx, l)
	}}
	l, err := distlock.New(b).Mutex("k", distlock.WithTTL(100*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(context.Background()) }()
	deadline := l.ValidUntil()
	select {
	case <-l.Done():
		if late := time.Since(deadline); late < 0 {
			t.Fatalf("Done closed %v before the deadline, while the release was still pending", -late)
		}
	case <-time.After(time.Until(deadline) + 2*time.Second):
		t.Fatal("Done still open 2s past ValidUntil while Unlock waits for the release")
	}
	if !errors.Is(l.Err(), distlock.ErrLockExpired) {
		t.Errorf("Err %v, want ErrLockExpired", l.Err())
	}
	close(hold)
	// The store let the key expire meanwhile, so the release finds it gone.
	if err := <-unlocked; err != nil && !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock: %v, want nil or ErrLockLost", err)
	}
}

// TestRefreshAboveBackendMaximum: a renewal to a TTL the backend refuses as
// longer than its maximum lease is an invalid TTL, whatever the TTL, and
// leaves the lock held.
func TestRefreshAboveBackendMaximum(t *testing.T) {
	f := memFault()
	f.refresh = func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
		if ttl > 20*time.Second {
			return 0, &driver.TTLTooLongError{TTL: ttl, Max: 20 * time.Second}
		}
		return next(ctx, l, ttl)
	}
	c := distlock.New(f)
	ctx := context.Background()
	l, err := c.Mutex("k", distlock.WithTTL(10*time.Second)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if err := l.Refresh(ctx, 25*time.Second); !errors.Is(err, distlock.ErrInvalidTTL) || !errors.Is(err, driver.ErrTTLTooLong) {
		t.Errorf("Refresh above the maximum: %v; want ErrInvalidTTL wrapping driver.ErrTTLTooLong", err)
	}
	if err := l.Err(); err != nil {
		t.Errorf("the refused renewal ended the lock: %v", err)
	}
}

func TestWatchdogRidesOutTransientRefreshErrors(t *testing.T) {
	f := memFault()
	f.refresh = failRefreshes(2, errInjected)
	// A lease of a second: the retries of the failed renewals must land
	// within it also on a machine whose CPUs are busy.
	l, err := distlock.New(f, distlock.WithTTL(time.Second)).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended after transient refresh errors: %v", err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

func TestHangingRefreshExpiresByDeadline(t *testing.T) {
	f := memFault()
	f.refresh = func(context.Context, driver.Lease, time.Duration, refreshFunc) (time.Duration, error) {
		select {} // a server that never answers and a client that ignores ctx
	}
	// The allowance for a timer that fires late on a busy machine is half
	// the TTL: a Done that waited for the next renewal's turn, or for the
	// hanging call, would be a TTL late or never come.
	const ttl = time.Second
	l, err := distlock.New(f, distlock.WithTTL(ttl)).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := l.ValidUntil()
	select {
	case <-l.Done():
	case <-time.After(ttl + 3*time.Second):
		t.Fatal("Done not closed although no renewal could be confirmed")
	}
	if late := time.Since(deadline); late > ttl/2 {
		t.Errorf("Done closed %v after ValidUntil", late)
	}
	if !errors.Is(l.Err(), distlock.ErrLockExpired) {
		t.Errorf("Err() = %v; want ErrLockExpired", l.Err())
	}
}

func TestBackendLostSignalEndsLease(t *testing.T) {
	f := memFault()
	lost := make(chan struct{})
	f.acquire = func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		g, err := next(ctx, req)
		g.Lost = lost
		return g, err
	}
	l, err := distlock.New(f).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := l.Context(context.Background())
	close(lost)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Lock.Context not cancelled on the backend's loss signal")
	}
	if !errors.Is(context.Cause(ctx), distlock.ErrLockLost) {
		t.Errorf("cause %v; want ErrLockLost", context.Cause(ctx))
	}
}

func TestContextOfParentEnds(t *testing.T) {
	l, err := distlock.New(memlock.New()).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	parent, cancel := context.WithCancel(context.Background())
	ctx := l.Context(parent)
	cancel()
	<-ctx.Done()
	if l.Err() != nil {
		t.Errorf("cancelling the work's parent ended the lease: %v", l.Err())
	}
}
