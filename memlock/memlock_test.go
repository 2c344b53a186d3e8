package memlock_test

import (
	"context"
	"errors"
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
		NewBackend: func(distlocktest.TB) driver.Backend { return b },
		Expire:     func(_ distlocktest.TB, key string) { b.Expire(key) },
		TTL:        100 * time.Millisecond,
	})
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
	req := driver.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("%s: %v; want ErrInvalidBackend", name, err)
		}
	}
	_, err := b.Acquire(ctx, req)
	check("Acquire", err)
	check("Release", b.Release(ctx, "k", "o"))
	_, err = b.Refresh(ctx, "k", "o", time.Second)
	check("Refresh", err)
	_, err = b.Inspect(ctx, "k")
	check("Inspect", err)
	_, err = b.Watch(ctx, "k")
	check("Watch", err)
	check("Leave", b.Leave(ctx, "k", "o"))
	_, err = b.AcquirePermit(ctx, req, 2)
	check("AcquirePermit", err)
	check("ReleasePermit", b.ReleasePermit(ctx, "k", "o"))
	_, err = b.RefreshPermit(ctx, "k", "o", time.Second)
	check("RefreshPermit", err)
	_, err = b.AcquireExclusive(ctx, req)
	check("AcquireExclusive", err)
	_, err = b.AcquireShared(ctx, req)
	check("AcquireShared", err)
	check("ReleaseShared", b.ReleaseShared(ctx, "k", "o"))
	_, err = b.RefreshShared(ctx, "k", "o", time.Second)
	check("RefreshShared", err)
	b.Expire("k")
	b.ExpirePermits("k")
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
// lapses and says so (RetryAfter), rather than leaving the next waiter to
// its safety poll.
func TestFairWaiterBehindVanishedWaiter(t *testing.T) {
	b := memlock.New()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := b.Acquire(ctx, driver.AcquireRequest{Key: "k", Owner: "holder", TTL: time.Minute, Fair: true}); err != nil {
		t.Fatal(err)
	}
	// A waiter queues behind the holder, then its process dies.
	if _, err := b.Acquire(ctx, driver.AcquireRequest{Key: "k", Owner: "ghost", TTL: time.Minute, Fair: true, Queue: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "k", "holder"); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, driver.AcquireRequest{Key: "k", Owner: "next", TTL: time.Minute, Fair: true, Queue: time.Minute})
	if err != nil || g.Acquired {
		t.Fatalf("Acquire ahead of the queue: %+v, %v", g, err)
	}
	if g.RetryAfter <= 0 || g.RetryAfter > 100*time.Millisecond {
		t.Errorf("RetryAfter = %v; want when the vanished waiter's place lapses (within 100ms)", g.RetryAfter)
	}
	_ = b.Leave(ctx, "k", "next")

	c := distlock.New(b, distlock.WithFairness(), distlock.WithSafetyPoll(10*time.Second))
	l, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatalf("fair waiter behind a vanished one: %v", err)
	}
	_ = l.Unlock(ctx)
}
