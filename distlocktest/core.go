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

// coreChecks run for every backend.
var coreChecks = []check{
	{"CapabilitiesDeclared", nil, testCapabilities},
	{"MutualExclusion", nil, testMutualExclusion},
	{"TryLockExclusive", nil, testTryLockExclusive},
	{"LockWakesPromptly", nil, testLockWakesPromptly},
	{"CancelWhileWaiting", nil, testCancelWhileWaiting},
	{"NonHolderCannotReleaseOrRefresh", nil, testNonHolder},
	{"ExpiryThenTakeover", nil, testExpiryThenTakeover},
	{"ForcedExpiryEndsHolder", nil, testForcedExpiry},
	{"RefreshExtends", nil, testRefreshExtends},
	{"WatchdogKeepsLock", nil, testWatchdog},
	{"TokensIncrease", nil, testTokensIncrease},
	{"AcquireIsIdempotent", nil, testIdempotentAcquire},
	{"ReleaseIsIdempotent", nil, testIdempotentRelease},
	{"KeysIndependent", nil, testKeysIndependent},
	{"UnlockTwice", nil, testUnlockTwice},
	{"UnlockWithCancelledContext", nil, testUnlockCancelled},
	{"InvalidInput", nil, testInvalidInput},
	{"InvalidRequest", nil, testInvalidRequest},
}

// testCapabilities: the capabilities are constant, and a backend that
// cannot notify says so when asked to watch.
func testCapabilities(t testing.TB, h Harness) {
	b := h.NewBackend(t)
	caps := b.Capabilities()
	if again := h.NewBackend(t).Capabilities(); again != caps || b.Capabilities() != caps {
		t.Errorf("Capabilities changed between calls: %+v, then %+v", caps, again)
	}
	if caps.Notify {
		return
	}
	w, err := b.Watch(timeout(t, 5*time.Second), uniqueKey(t), "")
	if err == nil {
		w.Close()
	}
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Watch on a backend that does not claim Notify: %v; want an error wrapping errors.ErrUnsupported", err)
	}
}

func testMutualExclusion(t testing.TB, h Harness) {
	const workers, rounds = 6, 15
	key := uniqueKey(t)
	var (
		counter atomic.Int64 // updated read-modify-write: lost updates show overlap
		entered atomic.Int64 // critical sections run
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
	)
	errs := make(chan error, workers)
	for range workers {
		m := newClient(t, h, distlock.WithTTL(10*time.Second)).Mutex(key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := timeout(t, 60*time.Second)
			for range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					overlap.Add(1)
				}
				v := counter.Load()
				time.Sleep(200 * time.Microsecond)
				counter.Store(v + 1)
				entered.Add(1)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d critical sections overlapped", n)
	}
	if got, want := counter.Load(), entered.Load(); got != want {
		t.Errorf("counter = %d after %d increments under the lock: updates were lost", got, want)
	}
	if n := entered.Load(); n != workers*rounds {
		t.Errorf("%d of %d critical sections ran", n, workers*rounds)
	}
}

func testTryLockExclusive(t testing.TB, h Harness) {
	key := uniqueKey(t)
	a := mustLock(t, newClient(t, h).Mutex(key))
	b := newClient(t, h).Mutex(key)
	if l, err := b.TryLock(timeout(t, 5*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(context.Background())
		}
		t.Fatalf("TryLock on a held key: %v; want ErrNotObtained", err)
	}
	if err := a.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	l, err := b.TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if l.Key() != key {
		t.Errorf("Key() = %q, want %q", l.Key(), key)
	}
	_ = l.Unlock(context.Background())
}

func testLockWakesPromptly(t testing.TB, h Harness) {
	key := uniqueKey(t)
	// A bound far below the holder's TTL and below any polling fallback:
	// only a woken (or briskly polling) waiter meets it.
	bound := time.Second
	opts := []distlock.Option{distlock.WithTTL(30 * time.Second)}
	if h.NewBackend(t).Capabilities().Notify {
		// Make the safety poll useless, so only the notification helps.
		opts = append(opts, distlock.WithSafetyPoll(30*time.Second))
		bound = 500 * time.Millisecond
	}
	holder := mustLock(t, newClient(t, h, opts...).Mutex(key))
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	waiter := newClient(t, h, opts...).Mutex(key)
	go func() {
		l, err := waiter.Lock(timeout(t, 10*time.Second))
		if err != nil {
			errc <- err
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter start waiting
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	released := time.Now()
	select {
	case at := <-got:
		if d := at.Sub(released); d > bound {
			t.Errorf("waiter acquired %v after the release; want within %v", d, bound)
		}
	case err := <-errc:
		t.Fatalf("waiting Lock: %v", err)
	case <-time.After(bound + 5*time.Second):
		t.Fatalf("waiter not woken %v after the release", bound+5*time.Second)
	}
}

func testCancelWhileWaiting(t testing.TB, h Harness) {
	key := uniqueKey(t)
	holder := mustLock(t, newClient(t, h).Mutex(key))
	waiter := newClient(t, h).Mutex(key)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := waiter.Lock(ctx)
	if err == nil {
		_ = l.Unlock(context.Background())
		t.Fatalf("Lock on a held key succeeded")
	}
	if !errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock with an expiring ctx: %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Lock returned %v after its deadline of 150ms", d)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	if _, err := waiter.Lock(ctx2); !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("Lock with a cancelled ctx: %v; want ErrNotObtained and Canceled", err)
	}

	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// The abandoned waits left nothing behind: the key is free at once.
	l, err = newClient(t, h).Mutex(key).TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the waiters gave up and the holder left: %v", err)
	}
	_ = l.Unlock(context.Background())
}

func testNonHolder(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	holder := mustLock(t, newClient(t, h, distlock.WithTTL(10*time.Second)).Mutex(key))
	other := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	stranger := driver.Lease{Key: key, Owner: owner("stranger")}
	if err := other.Release(ctx, stranger); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release by a non-owner: %v; want driver.ErrNotHeld", err)
	}
	if _, err := other.Refresh(ctx, stranger, ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh by a non-owner: %v; want driver.ErrNotHeld", err)
	}
	assertHeld(t, h, key, "after a non-owner's Release")
	if _, err := other.Refresh(ctx, driver.Lease{Key: uniqueKey(t), Owner: owner("nobody")}, ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of a free key: %v; want driver.ErrNotHeld", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Errorf("Unlock by the holder: %v", err)
	}
}

func testExpiryThenTakeover(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	a := mustLock(t, newClient(t, h, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex(key))
	deadline := a.ValidUntil()
	if d := time.Until(deadline); d > ttl || d <= 0 {
		t.Errorf("ValidUntil is %v away; want in (0, %v]", d, ttl)
	}
	// The handle ends on its own by its local deadline.
	if !waitDone(a, time.Until(deadline)+ttl+time.Second) {
		t.Fatalf("Done not closed %v after ValidUntil", ttl+time.Second)
	}
	if late := time.Since(deadline); late > ttl+500*time.Millisecond {
		t.Errorf("Done closed %v after ValidUntil", late)
	}
	if err := a.Err(); !errors.Is(err, distlock.ErrLockExpired) || !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Err() after expiry = %v; want ErrLockExpired (and ErrLockLost)", err)
	}
	// The server lets another client in once the TTL has run out.
	b := newClient(t, h, distlock.WithTTL(10*time.Second)).Mutex(key)
	var lb *distlock.Lock
	for end := time.Now().Add(3*ttl + 2*time.Second); ; {
		l, err := b.TryLock(timeout(t, 5*time.Second))
		if err == nil {
			lb = l
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no other client could take the key %v after its TTL of %v: %v", 3*ttl+2*time.Second, ttl, err)
		}
		time.Sleep(ttl / 10)
	}
	if lb.Token() <= a.Token() {
		t.Errorf("new holder's token %d is not above the expired holder's %d", lb.Token(), a.Token())
	}
	if err := a.Unlock(timeout(t, 5*time.Second)); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock by the expired holder: %v; want ErrLockLost", err)
	}
	assertHeld(t, h, key, "after the expired holder's Unlock")
	if err := lb.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Errorf("Unlock by the new holder: %v", err)
	}
}

func testForcedExpiry(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	a := mustLock(t, newClient(t, h, distlock.WithTTL(ttl)).Mutex(key))
	work := a.Context(context.Background())
	h.Expire(t, key)
	b, err := newClient(t, h, distlock.WithTTL(10*time.Second)).Mutex(key).TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the key was expired: %v", err)
	}
	defer func() { _ = b.Unlock(context.Background()) }()
	// The old holder's next renewal (within ttl/3) is refused.
	if !waitDone(a, ttl+time.Second) {
		t.Fatalf("old holder's Done not closed %v after its key was taken over", ttl+time.Second)
	}
	if err := a.Err(); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("old holder's Err() = %v; want ErrLockLost", err)
	}
	select {
	case <-work.Done():
		if cause := context.Cause(work); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("Context cause = %v; want ErrLockLost", cause)
		}
	case <-time.After(time.Second):
		t.Errorf("Lock.Context not cancelled after the lease was lost")
	}
	if err := a.Unlock(timeout(t, 5*time.Second)); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock by the old holder: %v; want ErrLockLost", err)
	}
	assertHeld(t, h, key, "after the old holder's Unlock")
	if b.Token() <= a.Token() {
		t.Errorf("new token %d is not above the old %d", b.Token(), a.Token())
	}
}

func testRefreshExtends(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.renewalTTL()
	a := mustLock(t, newClient(t, h, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex(key))
	before := a.ValidUntil()
	time.Sleep(ttl / 2)
	if err := a.Refresh(timeout(t, 5*time.Second), 4*ttl); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if after := a.ValidUntil(); !after.After(before.Add(ttl)) {
		t.Errorf("ValidUntil moved by %v; want more than %v", after.Sub(before), ttl)
	}
	time.Sleep(ttl) // past the original TTL
	if err := a.Err(); err != nil {
		t.Errorf("handle ended after an extending Refresh: %v", err)
	}
	assertHeld(t, h, key, "past the original TTL after Refresh")
	if err := a.Refresh(timeout(t, 5*time.Second), 0); !errors.Is(err, distlock.ErrInvalidTTL) {
		t.Errorf("Refresh(0): %v; want ErrInvalidTTL", err)
	}
	if err := a.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if err := a.Refresh(timeout(t, 5*time.Second), ttl); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("Refresh after Unlock: %v; want ErrLockReleased", err)
	}
}

func testWatchdog(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.renewalTTL()
	a := mustLock(t, newClient(t, h, distlock.WithTTL(ttl)).Mutex(key))
	first := a.ValidUntil()
	time.Sleep(4 * ttl)
	if err := a.Err(); err != nil {
		t.Fatalf("lease ended while the watchdog ran: %v", err)
	}
	if !a.ValidUntil().After(first.Add(2 * ttl)) {
		t.Errorf("ValidUntil did not advance with renewals")
	}
	assertHeld(t, h, key, "after 4 TTLs under the watchdog")
	if err := a.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if !waitDone(a, 0) || !errors.Is(a.Err(), distlock.ErrLockReleased) {
		t.Errorf("after Unlock: Done closed %v, Err() = %v; want closed, ErrLockReleased", waitDone(a, 0), a.Err())
	}
}

func testTokensIncrease(t testing.TB, h Harness) {
	key := uniqueKey(t)
	clients := []*distlock.Mutex{newClient(t, h).Mutex(key), newClient(t, h).Mutex(key)}
	var last uint64
	for i := range 20 {
		l := mustLock(t, clients[i%2])
		if l.Token() <= last {
			t.Errorf("holding %d got token %d, not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(timeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

func testIdempotentAcquire(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("attempt-1")}, TTL: 10 * time.Second}
	g1, err := b.Acquire(ctx, req)
	if err != nil || !g1.Acquired {
		t.Fatalf("Acquire: %+v, %v", g1, err)
	}
	defer func() { _ = b.Release(context.Background(), req.Lease) }()
	g2, err := b.Acquire(ctx, req) // the retry of an attempt whose reply was lost
	if err != nil || !g2.Acquired {
		t.Fatalf("repeated Acquire by the same owner: %+v, %v; want granted", g2, err)
	}
	if g2.Token != g1.Token {
		t.Errorf("repeated Acquire returned token %d, first %d; want the same", g2.Token, g1.Token)
	}
	g3, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: owner("attempt-2")}, TTL: 10 * time.Second})
	if err != nil || g3.Acquired {
		t.Fatalf("Acquire by another owner: %+v, %v; want not acquired", g3, err)
	}
	if g3.RetryAfter < 0 || g3.RetryAfter > 10*time.Second {
		t.Errorf("RetryAfter = %v; want within the holder's TTL of 10s", g3.RetryAfter)
	}
}

// testIdempotentRelease: a release repeated after its reply was lost
// reports success, and takes nothing from the next holder.
func testIdempotentRelease(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	first := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("first")}, TTL: 10 * time.Second}
	if g, err := b.Acquire(ctx, first); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if err := b.Release(ctx, first.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := b.Release(ctx, first.Lease); err != nil {
		t.Errorf("Release repeated (its first reply lost): %v; want nil, the release it made", err)
	}
	next := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("next")}, TTL: 10 * time.Second}
	if g, err := b.Acquire(ctx, next); err != nil || !g.Acquired {
		t.Fatalf("Acquire after the release: %+v, %v", g, err)
	}
	defer func() { _ = b.Release(context.Background(), next.Lease) }()
	if err := b.Release(ctx, first.Lease); err != nil {
		t.Errorf("Release repeated once more: %v; want nil", err)
	}
	assertHeld(t, h, key, "after a repeated release of the previous holder")
}

func testKeysIndependent(t testing.TB, h Harness) {
	k1, k2 := uniqueKey(t), uniqueKey(t)
	c := newClient(t, h)
	a := mustLock(t, c.Mutex(k1))
	b, err := c.Mutex(k2).TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock of a second key while the first is held: %v", err)
	}
	if err := a.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	assertHeld(t, h, k2, "after unlocking another key")
	if b.Err() != nil {
		t.Errorf("second key's handle ended: %v", b.Err())
	}
	_ = b.Unlock(context.Background())
}

func testUnlockTwice(t testing.TB, h Harness) {
	a := mustLock(t, newClient(t, h).Mutex(uniqueKey(t)))
	ctx := timeout(t, 5*time.Second)
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("second Unlock: %v; want ErrLockReleased", err)
	}
}

func testUnlockCancelled(t testing.TB, h Harness) {
	key := uniqueKey(t)
	a := mustLock(t, newClient(t, h).Mutex(key))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a cancelled ctx: %v; want the lock released anyway", err)
	}
	l, err := newClient(t, h).Mutex(key).TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock after Unlock with a cancelled ctx: %v", err)
	}
	_ = l.Unlock(context.Background())
}
