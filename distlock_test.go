package distlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

func held(t *testing.T, b driver.Backend, key string) bool {
	t.Helper()
	info, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

func TestTryLockLeavesNothingAfterLostReply(t *testing.T) {
	f := memFault()
	f.acquire = failAcquires(1, true, errInjected)
	_, err := distlock.New(f).Mutex("k").TryLock(context.Background())
	if !errors.Is(err, errInjected) {
		t.Fatalf("TryLock: %v; want the backend's error", err)
	}
	if held(t, f, "k") {
		t.Errorf("TryLock failed but left its lock behind")
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

func TestWorthlessGrantRefused(t *testing.T) {
	f := memFault()
	f.acquire = func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		g, err := next(ctx, req)
		if g.Acquired {
			g.ValidFor = -time.Millisecond
		}
		return g, err
	}
	_, err := distlock.New(f).Mutex("k").TryLock(context.Background())
	if err == nil {
		t.Fatal("TryLock accepted a grant with no validity")
	}
	if held(t, f, "k") {
		t.Errorf("worthless grant left a lock behind")
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

func TestNilArguments(t *testing.T) {
	var nilCtx context.Context
	m := distlock.New(memlock.New()).Mutex("k")
	if _, err := m.Lock(nilCtx); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("Lock(nil): %v", err)
	}
	if _, err := m.TryLock(nilCtx); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("TryLock(nil): %v", err)
	}
	if _, err := distlock.Open(nilCtx, "mem://"); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("Open(nil): %v", err)
	}
	var nilClient *distlock.Client
	if _, err := nilClient.Mutex("k").TryLock(context.Background()); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("nil client: %v", err)
	}
	var nilMutex *distlock.Mutex
	if _, err := nilMutex.Lock(context.Background()); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("nil Mutex: %v", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	a, err := distlock.Open(ctx, "mem://shared")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := distlock.Open(ctx, "mem://shared")
	l, err := a.Mutex("k").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("two clients of one mem:// URL do not share locks: %v", err)
	}
	_ = l.Unlock(ctx)
	for url, want := range map[string]error{
		"":               distlock.ErrInvalidURL,
		"localhost:6379": distlock.ErrUnknownScheme,
		"nosuch://x":     distlock.ErrUnknownScheme,
		"://x":           distlock.ErrInvalidURL,
		"mem\x00://":     distlock.ErrInvalidURL,
	} {
		if _, err := distlock.Open(ctx, url); !errors.Is(err, want) {
			t.Errorf("Open(%q) = %v; want %v", url, err, want)
		}
	}
	// A backend of this repository that was not imported: say which.
	_, err = distlock.Open(ctx, "etcd://127.0.0.1:2379/locks")
	if !errors.Is(err, distlock.ErrUnknownScheme) || !strings.Contains(err.Error(), `import _ "github.com/distlock-go/distlock/etcdlock"`) {
		t.Errorf("Open of an etcd URL without etcdlock imported: %v; want ErrUnknownScheme naming the import", err)
	}
}

func TestBackoffBounds(t *testing.T) {
	b := distlock.ExponentialBackoff(time.Millisecond, 8*time.Millisecond)
	for attempt, ceil := range map[int]time.Duration{1: 1, 2: 2, 3: 4, 4: 8, 10: 8} {
		ceil *= time.Millisecond
		for range 100 {
			if d := b.Next(attempt); d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, ceil/2, ceil)
			}
		}
	}
	var seen atomic.Int64
	c := distlock.ConstantBackoff(10 * time.Millisecond)
	for range 100 {
		seen.Store(int64(c.Next(1)))
		if d := time.Duration(seen.Load()); d < 5*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("constant: %v outside [5ms, 10ms]", d)
		}
	}
}

func TestOpenErrorsHidePasswords(t *testing.T) {
	for _, url := range []string{"//user:secret@host:1", "redis://user:secret@host:1/%zz", "nosuch://user:secret@host"} {
		_, err := distlock.Open(context.Background(), url)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", url, err)
		}
	}
}

func TestTypedNilBackend(t *testing.T) {
	ctx := context.Background()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a typed nil backend panicked: %v", r)
		}
	}()
	c := distlock.New((*memlock.Backend)(nil))
	for name, take := range map[string]func() (*distlock.Lock, error){
		"Mutex.Lock":           func() (*distlock.Lock, error) { return c.Mutex("k").Lock(ctx) },
		"Mutex.TryLock":        func() (*distlock.Lock, error) { return c.Mutex("k").TryLock(ctx) },
		"Semaphore.Acquire":    func() (*distlock.Lock, error) { return c.Semaphore("s", 2).Acquire(ctx) },
		"RWMutex.RLock":        func() (*distlock.Lock, error) { return c.RWMutex("rw").RLock(ctx) },
		"RWMutex.TryLock":      func() (*distlock.Lock, error) { return c.RWMutex("rw").TryLock(ctx) },
		"Semaphore.TryAcquire": func() (*distlock.Lock, error) { return c.Semaphore("s", 2).TryAcquire(ctx) },
	} {
		if _, err := take(); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("%s: %v; want ErrInvalidBackend", name, err)
		}
	}
	if _, err := distlock.LockAll(ctx, c.Mutex("a")); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("LockAll: %v; want ErrInvalidBackend", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// silentWatch notifies no one: a waiter relies on RetryAfter alone.
type silentWatch struct{}

func (silentWatch) C() <-chan struct{} { return nil }
func (silentWatch) Close() error       { return nil }

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
