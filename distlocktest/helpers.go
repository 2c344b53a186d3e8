package distlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

func newClient(t testing.TB, h Harness, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	return distlock.New(h.NewBackend(t), opts...)
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustLock takes m or ends the test.
func mustLock(t testing.TB, m *distlock.Mutex) *distlock.Lock {
	t.Helper()
	return mustLockIn(t, timeout(t, 10*time.Second), m)
}

// mustLockIn takes m with ctx or ends the test.
func mustLockIn(t testing.TB, ctx context.Context, m *distlock.Mutex) *distlock.Lock {
	t.Helper()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
	return l
}

// assertHeld checks, with a fresh client, that key is held by someone.
func assertHeld(t testing.TB, h Harness, key, why string) {
	t.Helper()
	l, err := newClient(t, h).Mutex(key).TryLock(timeout(t, 5*time.Second))
	if err == nil {
		_ = l.Unlock(context.Background())
		t.Errorf("%s: TryLock by another client succeeded; want the lock still held", why)
		return
	}
	if !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("%s: TryLock: %v; want ErrNotObtained", why, err)
	}
}

// waitDone waits for l.Done up to d and reports whether it closed.
func waitDone(l *distlock.Lock, d time.Duration) bool {
	select {
	case <-l.Done():
		return true
	default:
	}
	select {
	case <-l.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// tryFails asserts that try returns ErrNotObtained, releasing what it took
// otherwise.
func tryFails(t testing.TB, why string, try func(context.Context) (*distlock.Lock, error)) {
	t.Helper()
	l, err := try(timeout(t, 5*time.Second))
	if errors.Is(err, distlock.ErrNotObtained) {
		return
	}
	if l != nil {
		_ = l.Unlock(context.Background())
	}
	t.Errorf("%s: %v; want ErrNotObtained", why, err)
}

// acquire takes every request on b, in order, or ends the test; the
// holdings are released at cleanup.
func acquire(t testing.TB, ctx context.Context, b driver.Backend, reqs ...driver.Request) []driver.Grant {
	t.Helper()
	gs := make([]driver.Grant, len(reqs))
	for i, r := range reqs {
		t.Cleanup(func() { _ = b.Release(context.Background(), r.Lease) })
		g, err := b.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire(%s): %+v, %v; want granted", r.Owner, g, err)
		}
		gs[i] = g
	}
	return gs
}
