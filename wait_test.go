package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

var errRefusedConn = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

// stallAcquires is an acquire hook: the first n attempts fail with
// errRefusedConn, later ones block until ctx ends and return ctx's error,
// as a client does when the server stops answering.
func stallAcquires(n int32) func(context.Context, driver.Request, acquireFunc) (driver.Grant, error) {
	refuse := firstN(n)
	return func(ctx context.Context, _ driver.Request, _ acquireFunc) (driver.Grant, error) {
		if refuse() {
			return driver.Grant{}, errRefusedConn
		}
		<-ctx.Done()
		return driver.Grant{}, ctx.Err()
	}
}

// TestLockKeepsRealLastError: the attempt that ctx's end interrupted says
// only that ctx ended; the error Lock returns must still name the real
// cause seen before.
func TestLockKeepsRealLastError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := distlock.New(&fault{Backend: memlock.New(), acquire: stallAcquires(1)}).Mutex("k").Lock(ctx)
	for _, want := range []error{distlock.ErrNotObtained, context.DeadlineExceeded, errRefusedConn} {
		if !errors.Is(err, want) {
			t.Errorf("Lock: %v; want it to wrap %q", err, want)
		}
	}
}

// TestGivingUpDoesNotWaitForCleanup: an attempt of unknown outcome ends
// with ctx; the release that cleans up after it blocks. Lock and TryLock
// must return soon after ctx's deadline, not after the release timeout.
func TestGivingUpDoesNotWaitForCleanup(t *testing.T) {
	const releaseTimeout = 20 * time.Second
	for name, take := range map[string]func(*distlock.Mutex, context.Context) (*distlock.Lock, error){
		"Lock":    (*distlock.Mutex).Lock,
		"TryLock": (*distlock.Mutex).TryLock,
	} {
		t.Run(name, func(t *testing.T) {
			b := &fault{Backend: memlock.New(), acquire: stallAcquires(0), release: hangRelease}
			m := distlock.New(b, distlock.WithReleaseTimeout(releaseTimeout)).Mutex("k")
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := take(m, ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %v; want it to wrap context.DeadlineExceeded", name, err)
			}
			// Generous for a loaded machine, far below the release timeout.
			if took := time.Since(start); took > releaseTimeout/4 {
				t.Errorf("%s returned after %v; want it soon after its 200ms deadline", name, took)
			}
		})
	}
}

func TestLockRetriesTransientErrors(t *testing.T) {
	f := memFault()
	f.acquire = failAcquires(3, false, errInjected)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := distlock.New(f).Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v; want it to retry past transient errors", err)
	}
	_ = l.Unlock(ctx)
}

func TestLockResolvesLostReplyByRetry(t *testing.T) {
	f := memFault()
	f.acquire = failAcquires(1, true, errInjected)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := distlock.New(f, distlock.WithTTL(time.Minute)).Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if l.Token() != 1 {
		t.Errorf("token %d; want 1: the retry must be granted the lock its lost attempt took", l.Token())
	}
	_ = l.Unlock(ctx)
}

func TestLockGivingUpAfterErrorsLeavesNothing(t *testing.T) {
	f := memFault()
	f.acquire = failAcquires(1<<30, true, errInjected)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := distlock.New(f).Mutex("k").Lock(ctx)
	for _, want := range []error{distlock.ErrNotObtained, context.DeadlineExceeded, errInjected} {
		if !errors.Is(err, want) {
			t.Errorf("Lock: %v; want it to wrap %v", err, want)
		}
	}
	if held(t, f, "k") {
		t.Errorf("Lock gave up but left its lock behind")
	}
}

// silentWatch notifies no one: a waiter relies on RetryAfter alone.
type silentWatch struct{}

func (silentWatch) C() <-chan struct{} { return nil }

func (silentWatch) Close() error { return nil }

// TestWaiterHonoursRetryAfterWithWatch: a watch's sleep is the safety poll;
// the holder's remaining lease, when shorter, must win.
func TestWaiterHonoursRetryAfterWithWatch(t *testing.T) {
	b := memFault()
	b.watch = func(context.Context, string, string, watchFunc) (driver.Watch, error) { return silentWatch{}, nil }
	c := distlock.New(b, distlock.WithSafetyPoll(time.Minute), distlock.WithTTL(50*time.Millisecond), distlock.WithoutAutoRefresh())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Mutex("k").Lock(ctx); err != nil { // left to expire
		t.Fatal(err)
	}
	l, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatalf("waiter not woken by the holder's remaining lease: %v", err)
	}
	_ = l.Unlock(ctx)
}
