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

// releaseFaults is a release hook that counts releases and fails the
// next failures ones, without releasing, as a release sent into a
// connection blip or a busy store does.
type releaseFaults struct {
	failures atomic.Int32 // releases still to fail
	calls    atomic.Int32
	// inFlight, if set, runs while the first release is in flight, before
	// it reaches the store: the caller's context may end meanwhile.
	inFlight func()
}

var errBlip = errors.New("connection reset by peer")

// memFault returns a memlock backend whose releases pass r.
func (r *releaseFaults) memFault() *fault {
	return &fault{Backend: memlock.New(), release: func(ctx context.Context, l driver.Lease, next releaseFunc) error {
		if r.calls.Add(1) == 1 && r.inFlight != nil {
			r.inFlight()
		}
		if r.failures.Add(-1) >= 0 {
			return errBlip
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return next(ctx, l)
	}}
}

// mustBeFree fails t unless another client can take key at once.
func mustBeFree(t *testing.T, store driver.Backend, key string) {
	t.Helper()
	l, err := distlock.New(store).Mutex(key).TryLock(context.Background())
	if err != nil {
		t.Fatalf("the key is still held after Unlock: %v", err)
	}
	_ = l.Unlock(context.Background())
}

// TestUnlockCancelledMidRelease: a scheduler cancels the job's context
// while Unlock's release is in flight. The release must still complete:
// a release that stops with the context leaves the key held for its TTL.
func TestUnlockCancelledMidRelease(t *testing.T) {
	var r releaseFaults
	b := r.memFault()
	l, err := distlock.New(b).Mutex("job", distlock.WithTTL(time.Minute)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.inFlight = cancel
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock whose context was cancelled mid-release: %v; want nil", err)
	}
	mustBeFree(t, b.Backend, "job")
}

// TestUnlockRepeatsRelease: a release whose outcome is unknown is
// repeated until the backend confirms it.
func TestUnlockRepeatsRelease(t *testing.T) {
	var r releaseFaults
	b := r.memFault()
	l, err := distlock.New(b).Mutex("job", distlock.WithTTL(time.Minute)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.failures.Store(3)
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock after 3 failed releases: %v; want nil", err)
	}
	if n := r.calls.Load(); n != 4 {
		t.Errorf("%d releases sent; want 4 (3 failed, 1 confirmed)", n)
	}
	mustBeFree(t, b.Backend, "job")
}

// TestUnlockGivesUpAtReleaseTimeout: a backend that keeps failing is not
// retried past the release timeout, and Unlock reports its error.
func TestUnlockGivesUpAtReleaseTimeout(t *testing.T) {
	var r releaseFaults
	b := r.memFault()
	const timeout = 300 * time.Millisecond
	l, err := distlock.New(b).Mutex("job", distlock.WithTTL(time.Minute), distlock.WithReleaseTimeout(timeout)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.failures.Store(1 << 30)
	start := time.Now()
	err = l.Unlock(context.Background())
	if !errors.Is(err, errBlip) {
		t.Fatalf("Unlock against a store that keeps failing: %v; want the store's error", err)
	}
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Errorf("Unlock took %v; the release timeout is %v", took, timeout)
	}
	if n := r.calls.Load(); n < 2 {
		t.Errorf("%d releases sent; want repeats within the release timeout", n)
	}
	if err := l.Err(); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("Err after Unlock: %v; want ErrLockReleased", err)
	}
}

// TestNotHeldIsNotRepeated: ErrNotHeld is an outcome, not a failure to
// retry.
func TestNotHeldIsNotRepeated(t *testing.T) {
	var r releaseFaults
	b := r.memFault()
	l, err := distlock.New(b).Mutex("job", distlock.WithTTL(time.Minute)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Break(context.Background(), "job")
	if err != nil || !info.Held {
		t.Fatalf("Break: %+v, %v", info, err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, distlock.ErrLockLost) {
		t.Fatalf("Unlock of a broken lock: %v; want ErrLockLost", err)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("%d releases sent for a lock not held; want 1", n)
	}
}

// TestUnlockNamesTheStoreAnswer: when the last repeat of a release only
// runs out of time, Unlock still reports what the store answered before
// (here, that the connection was reset), not only the deadline.
func TestUnlockNamesTheStoreAnswer(t *testing.T) {
	// The first release fails with errBlip, as a refused connection does,
	// and every later one is held until its context ends, as a busy
	// machine can make the last repeat outlive the release timeout.
	var calls atomic.Int32
	b := &fault{Backend: memlock.New(), release: func(ctx context.Context, l driver.Lease, next releaseFunc) error {
		if calls.Add(1) == 1 {
			return errBlip
		}
		return hangRelease(ctx, l, next)
	}}
	l, err := distlock.New(b).Mutex("job", distlock.WithTTL(time.Minute), distlock.WithReleaseTimeout(200*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = l.Unlock(context.Background())
	if !errors.Is(err, errBlip) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock whose last repeat ran out of time: %v; want the store's earlier answer (%v) beside the deadline", err, errBlip)
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("%d releases sent; want the failed one repeated", n)
	}
}
