package distlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// semaphoreChecks run for backends that claim Semaphore.
var semaphoreChecks = []check{
	{"SemaphorePermits", semaphore, testSemaphorePermits},
	{"SemaphoreBoundsConcurrency", semaphore, testSemaphoreBounds},
	{"SemaphorePermitExpires", semaphore, testSemaphoreExpiry},
	{"SemaphoreOwnerChecks", semaphore, testSemaphoreOwners},
}

func testSemaphorePermits(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ctx := timeout(t, 10*time.Second)
	var held []*distlock.Lock
	defer func() {
		for _, l := range held {
			_ = l.Unlock(context.Background())
		}
	}()
	var last uint64
	for i := range 3 {
		l, err := newClient(t, h).Semaphore(key, 3).TryAcquire(ctx)
		if err != nil {
			t.Fatalf("permit %d of 3: %v", i+1, err)
		}
		if l.Token() <= last {
			t.Errorf("permit %d has token %d, not above %d", i+1, l.Token(), last)
		}
		last = l.Token()
		held = append(held, l)
	}
	if l, err := newClient(t, h).Semaphore(key, 3).TryAcquire(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("a fourth permit of 3: %v; want ErrNotObtained", err)
	}
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	l, err := newClient(t, h).Semaphore(key, 3).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a permit after one was given back: %v", err)
	}
	held[1] = l
}

func testSemaphoreBounds(t testing.TB, h Harness) {
	key := uniqueKey(t)
	const n, workers, rounds = 2, 5, 8
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		s := newClient(t, h, distlock.WithTTL(10*time.Second)).Semaphore(key, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := timeout(t, 60*time.Second)
			for range rounds {
				l, err := s.Acquire(ctx)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				now := inside.Add(1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > n {
		t.Errorf("%d holders at once of a semaphore of %d", m, n)
	}
}

func testSemaphoreExpiry(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	ctx := timeout(t, 10*time.Second)
	a, err := newClient(t, h, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Semaphore(key, 1).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if !waitDone(a, ttl+2*time.Second) {
		t.Fatalf("permit's Done not closed after its TTL")
	}
	s := newClient(t, h, distlock.WithTTL(10*time.Second)).Semaphore(key, 1)
	var b *distlock.Lock
	for end := time.Now().Add(3*ttl + 2*time.Second); b == nil; {
		if b, err = s.TryAcquire(ctx); err != nil && time.Now().After(end) {
			t.Fatalf("the expired permit was not freed: %v", err)
		}
		time.Sleep(ttl / 10)
	}
	defer func() { _ = b.Unlock(context.Background()) }()
	if b.Token() <= a.Token() {
		t.Errorf("token %d after an expired permit's %d", b.Token(), a.Token())
	}
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock of an expired permit: %v; want ErrLockLost", err)
	}
	if l, err := newClient(t, h).Semaphore(key, 1).TryAcquire(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Errorf("the expired holder's Unlock freed the new holder's permit: %v", err)
	}
}

func testSemaphoreOwners(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 10*time.Second)
	permit := func(name string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner(name), Kind: driver.Permit}, TTL: 10 * time.Second, Limit: 2}
	}
	p1, p2, p3 := permit("p1"), permit("p2"), permit("p3")
	defer func() {
		for _, p := range []driver.Request{p1, p2, p3} {
			_ = b.Release(context.Background(), p.Lease)
		}
	}()
	g1, err := b.Acquire(ctx, p1)
	if err != nil || !g1.Acquired {
		t.Fatalf("Acquire of a permit: %+v, %v", g1, err)
	}
	g2, err := b.Acquire(ctx, p1)
	if err != nil || !g2.Acquired || g2.Token != g1.Token {
		t.Errorf("repeated Acquire of a permit by the same owner: %+v, %v; want the same grant (token %d)", g2, err, g1.Token)
	}
	stranger := permit("stranger").Lease
	if err := b.Release(ctx, stranger); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of a permit by a non-holder: %v; want ErrNotHeld", err)
	}
	if _, err := b.Refresh(ctx, stranger, time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of a permit by a non-holder: %v; want ErrNotHeld", err)
	}
	if g, _ := b.Acquire(ctx, p2); !g.Acquired {
		t.Errorf("second permit of 2 not granted")
	}
	if g, _ := b.Acquire(ctx, p3); g.Acquired {
		t.Errorf("third permit of 2 granted")
	}
	if err := b.Release(ctx, p1.Lease); err != nil {
		t.Errorf("Release of a permit: %v", err)
	}
	if err := b.Release(ctx, p1.Lease); err != nil {
		t.Errorf("Release of a permit repeated (its first reply lost): %v; want nil", err)
	}
	if g, _ := b.Acquire(ctx, p3); !g.Acquired {
		t.Errorf("a permit given back (and its release repeated) was not free again")
	}
	if err := b.Release(ctx, p1.Lease); err != nil {
		t.Errorf("Release of a permit repeated once more: %v; want nil", err)
	}
	if g, _ := b.Acquire(ctx, permit("p4")); g.Acquired {
		t.Errorf("a repeated release freed another holder's permit")
	}
}
