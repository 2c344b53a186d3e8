package memlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

func TestConformance(t *testing.T) {
	b := memlock.New()
	distlocktest.Run(t, distlocktest.Harness{
		NewBackend: func(testing.TB) driver.Backend { return b },
		Expire:     func(_ testing.TB, key string) { b.Expire(key) },
		Stored:     func(_ testing.TB, prefix string) []string { return b.Stored(prefix) },
		TTL:        time.Second, // renewals every 1/3s: a few missed under a CPU hog and -race do not end the lease
	})
}

// counted is a wrapper as anyone writes one for metrics: it embeds the
// backend and overrides the one method it measures.
type counted struct {
	driver.Backend
	acquires atomic.Int64
}

func (c *counted) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	c.acquires.Add(1)
	return c.Backend.Acquire(ctx, req)
}

// TestWrapperKeepsCapabilities: a wrapper that embeds a Backend and
// overrides one method claims what the backend claims and passes the whole
// suite, every capability included.
func TestWrapperKeepsCapabilities(t *testing.T) {
	b := memlock.New()
	w := &counted{Backend: b}
	if got, want := w.Capabilities(), b.Capabilities(); got != want {
		t.Fatalf("the wrapper claims %+v; the backend %+v", got, want)
	}
	distlocktest.Run(t, distlocktest.Harness{
		NewBackend: func(testing.TB) driver.Backend { return w },
		Expire:     func(_ testing.TB, key string) { b.Expire(key) },
		TTL:        time.Second, // renewals every 1/3s: a few missed under a CPU hog and -race do not end the lease
	})
	if w.acquires.Load() == 0 {
		t.Errorf("the suite's acquisitions did not go through the wrapper")
	}
}

// TestNilBackend: every method of a nil *Backend reports an error (or does
// nothing, for those without one) instead of panicking.
func TestNilBackend(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("nil *Backend panicked: %v", r)
		}
	}()
	var b *memlock.Backend
	ctx := context.Background()
	l := driver.Lease{Key: "k", Owner: "o"}
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("%s: %v; want ErrInvalidBackend", name, err)
		}
	}
	for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Read, driver.Permit} {
		l.Kind = kind
		_, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Second, Limit: 2})
		check("Acquire", err)
		check("Release", b.Release(ctx, l))
		_, err = b.Refresh(ctx, l, time.Second)
		check("Refresh", err)
	}
	_, err := b.Inspect(ctx, "k")
	check("Inspect", err)
	_, err = b.Watch(ctx, "k", "")
	check("Watch", err)
	check("Close", b.Close())
	b.Expire("k")
}

// TestMaxTTL: a store with a maximum lease refuses a longer TTL, on
// Acquire and on Refresh, with the error that carries the maximum, which
// package distlock reports as an invalid TTL; shorter leases work.
func TestMaxTTL(t *testing.T) {
	b := memlock.New(memlock.WithMaxTTL(20 * time.Second))
	c := distlock.New(b)
	ctx := context.Background()
	var tl *driver.TTLTooLongError
	_, err := c.Mutex("k", distlock.WithTTL(25*time.Second)).TryLock(ctx)
	if !errors.Is(err, distlock.ErrInvalidTTL) || !errors.As(err, &tl) || tl.Max != 20*time.Second {
		t.Errorf("TryLock above the maximum: %v; want ErrInvalidTTL with a TTLTooLongError of Max 20s", err)
	}
	l, err := c.Mutex("k", distlock.WithTTL(20*time.Second)).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock at the maximum: %v", err)
	}
	defer l.Unlock(ctx)
	if err := l.Refresh(ctx, 21*time.Second); !errors.Is(err, distlock.ErrInvalidTTL) || !errors.Is(err, driver.ErrTTLTooLong) {
		t.Errorf("Refresh above the maximum: %v; want ErrInvalidTTL wrapping driver.ErrTTLTooLong", err)
	}
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Errorf("Refresh below the maximum: %v", err)
	}
}

// TestInvalidOption: an invalid option makes every method fail, naming
// it, and package distlock fails Lock at once rather than retrying.
func TestInvalidOption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, opt := range []memlock.Option{memlock.WithMaxTTL(0), nil} {
		b := memlock.New(opt)
		req := driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}
		_, err := b.Acquire(ctx, req)
		if !errors.Is(err, distlock.ErrInvalidBackend) || !strings.HasPrefix(err.Error(), "memlock: ") {
			t.Errorf("Acquire: %v; want a memlock error wrapping ErrInvalidBackend", err)
		}
		if err := b.Release(ctx, req.Lease); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("Release: %v; want ErrInvalidBackend", err)
		}
		if _, err := b.Watch(ctx, "k", ""); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("Watch: %v; want ErrInvalidBackend", err)
		}
		if _, err := distlock.New(b).Mutex("k").Lock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) || ctx.Err() != nil {
			t.Errorf("Lock: %v (ctx: %v); want ErrInvalidBackend at once", err, ctx.Err())
		}
	}
	if _, err := memlock.New(memlock.WithMaxTTL(-time.Second)).Inspect(ctx, "k"); err == nil || !strings.Contains(err.Error(), "WithMaxTTL(-1s)") {
		t.Errorf("Inspect: %v; want an error naming WithMaxTTL(-1s)", err)
	}
}

// TestZeroValue: a Backend that was not made by New is an empty store.
func TestZeroValue(t *testing.T) {
	var b memlock.Backend
	c := distlock.New(&b)
	ctx := context.Background()
	for _, take := range []func() (*distlock.Lock, error){
		func() (*distlock.Lock, error) { return c.Mutex("m").TryLock(ctx) },
		func() (*distlock.Lock, error) { return c.Semaphore("s", 2).TryAcquire(ctx) },
		func() (*distlock.Lock, error) { return c.RWMutex("rw").TryRLock(ctx) },
		func() (*distlock.Lock, error) { return c.Mutex("f", distlock.WithFairness()).TryLock(ctx) },
		func() (*distlock.Lock, error) {
			return c.Mutex("r", distlock.WithOwner(distlock.NewOwnerID())).TryLock(ctx)
		},
	} {
		l, err := take()
		if err != nil {
			t.Fatalf("zero Backend: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	}
}

// TestFairWaiterBehindVanishedWaiter: when the lock is free but a waiter
// that vanished still heads the queue, the store knows when its place
// lapses and says so (RetryAfter), and wakes the next waiter then, rather
// than leaving it to its safety poll.
func TestFairWaiterBehindVanishedWaiter(t *testing.T) {
	b := memlock.New()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := func(owner string, queue time.Duration) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: "k", Owner: owner}, TTL: time.Minute, Fair: true, Queue: queue}
	}
	if _, err := b.Acquire(ctx, req("holder", 0)); err != nil {
		t.Fatal(err)
	}
	// A waiter queues behind the holder, then its process dies.
	if _, err := b.Acquire(ctx, req("ghost", 100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, req("holder", 0).Lease); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, req("next", time.Minute))
	if err != nil || g.Acquired {
		t.Fatalf("Acquire ahead of the queue: %+v, %v", g, err)
	}
	if g.RetryAfter <= 0 || g.RetryAfter > 100*time.Millisecond {
		t.Errorf("RetryAfter = %v; want when the vanished waiter's place lapses (within 100ms)", g.RetryAfter)
	}
	w, err := b.Watch(ctx, "k", "next")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatalf("the next waiter was not woken when the place ahead of it lapsed")
	}
	_ = b.Release(ctx, req("next", 0).Lease)

	c := distlock.New(b, distlock.WithFairness(), distlock.WithSafetyPoll(10*time.Second))
	l, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatalf("fair waiter behind a vanished one: %v", err)
	}
	_ = l.Unlock(ctx)
}

// TestOpenURL: a URL names a store shared by every client that opens it;
// another name is another store.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	open := func(raw string) driver.Backend {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		b, err := memlock.OpenURL(ctx, u)
		if err != nil {
			t.Fatalf("OpenURL(%s): %v", raw, err)
		}
		return b
	}
	if a, b := open("mem://jobs-openurl"), open("mem://jobs-openurl"); a != b {
		t.Errorf("one name opened two stores")
	}
	if a, b := open("mem://jobs-openurl"), open("mem://other-openurl"); a == b {
		t.Errorf("two names opened one store")
	}
	if _, err := memlock.OpenURL(ctx, nil); !errors.Is(err, distlock.ErrInvalidURL) {
		t.Errorf("OpenURL(nil): %v; want ErrInvalidURL", err)
	}
}
