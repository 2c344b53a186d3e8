package memlock_test

import (
	"context"
	"errors"
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
		TTL:        500 * time.Millisecond,
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
		TTL:        500 * time.Millisecond,
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

// TestBadRequests: requests no caller following the contract sends are
// errors, not locks.
func TestBadRequests(t *testing.T) {
	b := memlock.New()
	ctx := context.Background()
	for name, req := range map[string]driver.Request{
		"zero TTL":          {Lease: driver.Lease{Key: "k", Owner: "o"}},
		"unknown kind":      {Lease: driver.Lease{Key: "k", Owner: "o", Kind: 9}, TTL: time.Second},
		"semaphore of none": {Lease: driver.Lease{Key: "k", Owner: "o", Kind: driver.Permit}, TTL: time.Second},
	} {
		if g, err := b.Acquire(ctx, req); err == nil {
			t.Errorf("%s: %+v; want an error", name, g)
		}
	}
	if _, err := b.Refresh(ctx, driver.Lease{Key: "k", Owner: "o"}, 0); err == nil {
		t.Errorf("Refresh with a zero TTL: no error")
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
