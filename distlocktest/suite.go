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

// check is one behaviour of the contract.
type check struct {
	name string
	run  func(t TB, h Harness)
}

// checks lists the suite. Each check bounds its own waiting, so a broken
// backend makes it fail, never hang.
var checks = []check{
	{"MutualExclusion", testMutualExclusion},
	{"TryLockExclusive", testTryLockExclusive},
	{"LockWakesPromptly", testLockWakesPromptly},
	{"CancelWhileWaiting", testCancelWhileWaiting},
	{"NonHolderCannotReleaseOrRefresh", testNonHolder},
	{"ExpiryThenTakeover", testExpiryThenTakeover},
	{"ForcedExpiryEndsHolder", testForcedExpiry},
	{"RefreshExtends", testRefreshExtends},
	{"WatchdogKeepsLock", testWatchdog},
	{"TokensIncrease", testTokensIncrease},
	{"AcquireIsIdempotent", testIdempotentAcquire},
	{"KeysIndependent", testKeysIndependent},
	{"UnlockTwice", testUnlockTwice},
	{"UnlockWithCancelledContext", testUnlockCancelled},
	{"InvalidInput", testInvalidInput},
}

// semaphoreChecks run for backends that claim driver.Capabilities.Semaphore.
var semaphoreChecks = []check{
	{"SemaphorePermits", testSemaphorePermits},
	{"SemaphoreBoundsConcurrency", testSemaphoreBounds},
	{"SemaphorePermitExpires", testSemaphoreExpiry},
	{"SemaphoreOwnerChecks", testSemaphoreOwners},
}

// rwChecks run for backends that claim driver.Capabilities.ReadWrite.
var rwChecks = []check{
	{"RWReadersShareWritersExclude", testRWShare},
	{"RWWaitingWriterHoldsReadersOff", testRWWriterFirst},
	{"RWWriterGivingUpLetsReadersIn", testRWWriterGivesUp},
	{"RWReadLeaseExpires", testRWReaderExpiry},
}

// fairChecks run for backends that claim driver.Capabilities.Fair.
var fairChecks = []check{
	{"FairOrder", testFairOrder},
	{"FairNoQueueJumping", testFairNoQueueJumping},
	{"FairGiveUpFreesPlace", testFairGiveUp},
}

// Run runs the conformance suite against the backend h describes, each
// check as a subtest.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewBackend == nil || h.Expire == nil {
		t.Fatal("distlocktest: Harness.NewBackend and Harness.Expire are required")
	}
	all := checks[:len(checks):len(checks)]
	caps := h.NewBackend(t).Capabilities()
	if caps.Fair {
		all = append(all, fairChecks...)
	} else {
		t.Logf("distlocktest: the backend does not claim Fair; fair-lock checks not run")
	}
	if caps.Semaphore {
		all = append(all, semaphoreChecks...)
	} else {
		t.Logf("distlocktest: the backend does not claim Semaphore; semaphore checks not run")
	}
	if caps.ReadWrite {
		all = append(all, rwChecks...)
	} else {
		t.Logf("distlocktest: the backend does not claim ReadWrite; read-write lock checks not run")
	}
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

func newClient(t TB, h Harness, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	return distlock.New(h.NewBackend(t), opts...)
}

func timeout(t TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustLock takes key or ends the test.
func mustLock(t TB, m *distlock.Mutex) *distlock.Lock {
	t.Helper()
	l, err := m.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
	return l
}

// assertHeld checks, with a fresh client, that key is held by someone.
func assertHeld(t TB, h Harness, key, why string) {
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

func testMutualExclusion(t TB, h Harness) {
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

func testTryLockExclusive(t TB, h Harness) {
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

func testLockWakesPromptly(t TB, h Harness) {
	key := uniqueKey(t)
	// A bound far below the holder's TTL and below any polling fallback:
	// only a woken (or briskly polling) waiter meets it.
	bound := time.Second
	opts := []distlock.Option{distlock.WithTTL(30 * time.Second)}
	probe := h.NewBackend(t)
	if probe.Capabilities().NotifiedWait {
		if _, ok := probe.(driver.Waiter); !ok {
			t.Fatalf("backend claims NotifiedWait but does not implement driver.Waiter")
		}
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

func testCancelWhileWaiting(t TB, h Harness) {
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

func testNonHolder(t TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	holder := mustLock(t, newClient(t, h, distlock.WithTTL(10*time.Second)).Mutex(key))
	other := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	if err := other.Release(ctx, key, "not-the-owner"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release by a non-owner: %v; want driver.ErrNotHeld", err)
	}
	if _, err := other.Refresh(ctx, key, "not-the-owner", ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh by a non-owner: %v; want driver.ErrNotHeld", err)
	}
	assertHeld(t, h, key, "after a non-owner's Release")
	if _, err := other.Refresh(ctx, uniqueKey(t), "nobody", ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of a free key: %v; want driver.ErrNotHeld", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Errorf("Unlock by the holder: %v", err)
	}
}

func testExpiryThenTakeover(t TB, h Harness) {
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

func testForcedExpiry(t TB, h Harness) {
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

func testRefreshExtends(t TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
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

func testWatchdog(t TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
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

func testTokensIncrease(t TB, h Harness) {
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

func testIdempotentAcquire(t TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	req := driver.AcquireRequest{Key: key, Owner: "attempt-1", TTL: 10 * time.Second}
	g1, err := b.Acquire(ctx, req)
	if err != nil || !g1.Acquired {
		t.Fatalf("Acquire: %+v, %v", g1, err)
	}
	defer func() { _ = b.Release(context.Background(), key, req.Owner) }()
	g2, err := b.Acquire(ctx, req) // the retry of an attempt whose reply was lost
	if err != nil || !g2.Acquired {
		t.Fatalf("repeated Acquire by the same owner: %+v, %v; want granted", g2, err)
	}
	if g2.Token != g1.Token {
		t.Errorf("repeated Acquire returned token %d, first %d; want the same", g2.Token, g1.Token)
	}
	g3, err := b.Acquire(ctx, driver.AcquireRequest{Key: key, Owner: "attempt-2", TTL: 10 * time.Second})
	if err != nil || g3.Acquired {
		t.Fatalf("Acquire by another owner: %+v, %v; want not acquired", g3, err)
	}
	if g3.RetryAfter < 0 || g3.RetryAfter > 10*time.Second {
		t.Errorf("RetryAfter = %v; want within the holder's TTL of 10s", g3.RetryAfter)
	}
}

func testKeysIndependent(t TB, h Harness) {
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

func testUnlockTwice(t TB, h Harness) {
	a := mustLock(t, newClient(t, h).Mutex(uniqueKey(t)))
	ctx := timeout(t, 5*time.Second)
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("second Unlock: %v; want ErrLockReleased", err)
	}
}

func testUnlockCancelled(t TB, h Harness) {
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

func testInvalidInput(t TB, h Harness) {
	c := newClient(t, h)
	ctx := timeout(t, 5*time.Second)
	cases := []struct {
		name string
		m    *distlock.Mutex
		want error
	}{
		{"empty key", c.Mutex(""), distlock.ErrInvalidKey},
		{"overlong key", c.Mutex(string(make([]byte, distlock.MaxKeyLen+1))), distlock.ErrInvalidKey},
		{"zero TTL", c.Mutex("k", distlock.WithTTL(0)), distlock.ErrInvalidTTL},
		{"negative TTL", c.Mutex("k", distlock.WithTTL(-time.Second)), distlock.ErrInvalidTTL},
		{"tiny TTL", c.Mutex("k", distlock.WithTTL(time.Nanosecond)), distlock.ErrInvalidTTL},
		{"refresh interval above TTL", c.Mutex("k", distlock.WithTTL(time.Second), distlock.WithRefreshInterval(2*time.Second)), distlock.ErrInvalidArgument},
		{"nil backoff", c.Mutex("k", distlock.WithBackoff(nil)), distlock.ErrInvalidArgument},
		{"nil backend", distlock.New(nil).Mutex("k"), distlock.ErrInvalidBackend},
	}
	for _, tc := range cases {
		if l, err := tc.m.TryLock(ctx); !errors.Is(err, tc.want) {
			if l != nil {
				_ = l.Unlock(ctx)
			}
			t.Errorf("%s: TryLock error %v; want %v", tc.name, err, tc.want)
		}
		if _, err := tc.m.Lock(ctx); !errors.Is(err, tc.want) {
			t.Errorf("%s: Lock error %v; want %v", tc.name, err, tc.want)
		}
	}
}

func testFairOrder(t TB, h Harness) {
	key := uniqueKey(t)
	fair := distlock.WithFairness()
	holder := mustLock(t, newClient(t, h, fair).Mutex(key))
	const n = 5
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		m := newClient(t, h, fair, distlock.WithTTL(10*time.Second)).Mutex(key)
		go func() {
			l, err := m.Lock(timeout(t, 30*time.Second))
			if err != nil {
				errs <- err
				return
			}
			order <- i
			time.Sleep(10 * time.Millisecond)
			_ = l.Unlock(context.Background())
		}()
		time.Sleep(100 * time.Millisecond) // waiter i queues before i+1 starts
	}
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	var got []int
	for range n {
		select {
		case i := <-order:
			got = append(got, i)
		case err := <-errs:
			t.Fatalf("fair waiter: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("fair waiters stuck; order so far %v", got)
		}
	}
	for i, w := range got {
		if w != i {
			t.Fatalf("fair waiters acquired in order %v; want the order they queued in", got)
		}
	}
}

// testFairNoQueueJumping works on the driver directly, so that the queued
// waiter provably has not retried when the others try.
func testFairNoQueueJumping(t TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 10*time.Second)
	acquire := func(owner string, queue time.Duration) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, driver.AcquireRequest{Key: key, Owner: owner, TTL: 10 * time.Second, Fair: true, Queue: queue})
		if err != nil {
			t.Fatalf("Acquire(%s): %v", owner, err)
		}
		return g
	}
	if !acquire("holder", 0).Acquired {
		t.Fatalf("first fair Acquire of a free key not granted")
	}
	if acquire("waiter", 10*time.Second).Acquired {
		t.Fatalf("fair Acquire of a held key granted")
	}
	if err := b.Release(ctx, key, "holder"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The key is free, but "waiter" queued first.
	if g := acquire("jumper", 0); g.Acquired {
		t.Errorf("a fair attempt that did not queue took the lock ahead of a queued waiter")
	}
	if g := acquire("latecomer", 10*time.Second); g.Acquired {
		t.Errorf("a later fair waiter took the lock ahead of the first")
	}
	g := acquire("waiter", 10*time.Second)
	if !g.Acquired {
		t.Fatalf("the first queued waiter was not granted the free lock")
	}
	if err := b.Release(ctx, key, "waiter"); err != nil {
		t.Errorf("Release: %v", err)
	}
	if !acquire("latecomer", 10*time.Second).Acquired {
		t.Errorf("the second queued waiter was not granted the lock after the first")
	}
	_ = b.Release(ctx, key, "latecomer")
	q, ok := b.(driver.Queuer)
	if !ok {
		t.Fatalf("backend claims Fair but does not implement driver.Queuer")
	}
	_ = q.Leave(ctx, key, "jumper")
}

func testFairGiveUp(t TB, h Harness) {
	key := uniqueKey(t)
	fair := distlock.WithFairness()
	holder := mustLock(t, newClient(t, h, fair).Mutex(key))
	quitter := newClient(t, h, fair).Mutex(key)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Lock(ctx)
		quit <- err
	}()
	time.Sleep(50 * time.Millisecond) // the quitter queues first
	got := make(chan time.Time, 1)
	next := newClient(t, h, fair).Mutex(key)
	go func() {
		l, err := next.Lock(timeout(t, 20*time.Second))
		if err != nil {
			t.Errorf("second waiter: %v", err)
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	if err := <-quit; !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("quitting waiter: %v; want ErrNotObtained", err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	released := time.Now()
	select {
	case at := <-got:
		if d := at.Sub(released); d > time.Second {
			t.Errorf("the waiter behind one that gave up got the lock %v after the release; want promptly (the place was given up)", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the waiter behind one that gave up never got the lock")
	}
}

func testSemaphorePermits(t TB, h Harness) {
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

func testSemaphoreBounds(t TB, h Harness) {
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

func testSemaphoreExpiry(t TB, h Harness) {
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

func testSemaphoreOwners(t TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	sem, ok := b.(driver.Semaphore)
	if !ok {
		t.Fatalf("backend claims Semaphore but does not implement driver.Semaphore")
	}
	ctx := timeout(t, 10*time.Second)
	req := driver.AcquireRequest{Key: key, Owner: "p1", TTL: 10 * time.Second}
	g1, err := sem.AcquirePermit(ctx, req, 2)
	if err != nil || !g1.Acquired {
		t.Fatalf("AcquirePermit: %+v, %v", g1, err)
	}
	g2, err := sem.AcquirePermit(ctx, req, 2)
	if err != nil || !g2.Acquired || g2.Token != g1.Token {
		t.Errorf("repeated AcquirePermit by the same owner: %+v, %v; want the same grant (token %d)", g2, err, g1.Token)
	}
	if err := sem.ReleasePermit(ctx, key, "stranger"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ReleasePermit by a non-holder: %v; want ErrNotHeld", err)
	}
	if _, err := sem.RefreshPermit(ctx, key, "stranger", time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("RefreshPermit by a non-holder: %v; want ErrNotHeld", err)
	}
	if g, _ := sem.AcquirePermit(ctx, driver.AcquireRequest{Key: key, Owner: "p2", TTL: 10 * time.Second}, 2); !g.Acquired {
		t.Errorf("second permit of 2 not granted")
	}
	if g, _ := sem.AcquirePermit(ctx, driver.AcquireRequest{Key: key, Owner: "p3", TTL: 10 * time.Second}, 2); g.Acquired {
		t.Errorf("third permit of 2 granted")
	}
	if err := sem.ReleasePermit(ctx, key, "p1"); err != nil {
		t.Errorf("ReleasePermit: %v", err)
	}
	if err := sem.ReleasePermit(ctx, key, "p1"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second ReleasePermit: %v; want ErrNotHeld", err)
	}
	_ = sem.ReleasePermit(ctx, key, "p2")
}

// tryFails asserts that try returns ErrNotObtained, releasing what it took
// otherwise.
func tryFails(t TB, why string, try func(context.Context) (*distlock.Lock, error)) {
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

func testRWShare(t TB, h Harness) {
	key := uniqueKey(t)
	ctx := timeout(t, 10*time.Second)
	r1, err := newClient(t, h).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	r2, err := newClient(t, h).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("a second reader: %v; want readers to share", err)
	}
	w := newClient(t, h).RWMutex(key)
	tryFails(t, "TryLock (write) while two readers hold", w.TryLock)
	_ = r1.Unlock(ctx)
	tryFails(t, "TryLock (write) while one reader holds", w.TryLock)
	_ = r2.Unlock(ctx)
	wl, err := w.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock (write) after the readers left: %v", err)
	}
	if wl.Token() <= r2.Token() {
		t.Errorf("writer's token %d is not above a reader's %d", wl.Token(), r2.Token())
	}
	tryFails(t, "TryRLock while a writer holds", newClient(t, h).RWMutex(key).TryRLock)
	tryFails(t, "a second writer", newClient(t, h).RWMutex(key).TryLock)
	_ = wl.Unlock(ctx)

	// A reader's retry after a lost reply gets the same grant.
	rw, ok := h.NewBackend(t).(driver.RWLocker)
	if !ok {
		t.Fatalf("backend claims ReadWrite but does not implement driver.RWLocker")
	}
	req := driver.AcquireRequest{Key: key, Owner: "reader", TTL: 10 * time.Second}
	g1, err1 := rw.AcquireShared(ctx, req)
	g2, err2 := rw.AcquireShared(ctx, req)
	if err1 != nil || err2 != nil || !g1.Acquired || !g2.Acquired || g1.Token != g2.Token {
		t.Errorf("repeated AcquireShared by one owner: %+v, %v then %+v, %v; want the same grant", g1, err1, g2, err2)
	}
	_ = rw.ReleaseShared(ctx, key, "reader")
}

func testRWWriterFirst(t TB, h Harness) {
	key := uniqueKey(t)
	ctx := timeout(t, 20*time.Second)
	r1, err := newClient(t, h).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	got := make(chan time.Time, 1)
	w := newClient(t, h).RWMutex(key)
	go func() {
		l, err := w.Lock(ctx)
		if err != nil {
			t.Errorf("waiting writer: %v", err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	time.Sleep(150 * time.Millisecond) // the writer is waiting
	tryFails(t, "a new reader while a writer waits", newClient(t, h).RWMutex(key).TryRLock)
	if err := r1.Unlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	released := time.Now()
	select {
	case at, ok := <-got:
		if ok && at.Sub(released) > 2*time.Second {
			t.Errorf("writer got the lock %v after the last reader left", at.Sub(released))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("waiting writer never got the lock")
	}
}

func testRWWriterGivesUp(t TB, h Harness) {
	key := uniqueKey(t)
	ctx := timeout(t, 10*time.Second)
	r1, err := newClient(t, h).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	defer func() { _ = r1.Unlock(context.Background()) }()
	wctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := newClient(t, h).RWMutex(key).Lock(wctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("writer past its deadline: %v; want ErrNotObtained", err)
	}
	r2, err := newClient(t, h).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("a reader after the waiting writer gave up: %v; want it admitted at once", err)
	}
	_ = r2.Unlock(ctx)
}

func testRWReaderExpiry(t TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	ctx := timeout(t, 10*time.Second)
	r, err := newClient(t, h, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).RWMutex(key).TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	if !waitDone(r, ttl+2*time.Second) {
		t.Fatalf("read lease's Done not closed after its TTL")
	}
	w := newClient(t, h, distlock.WithTTL(10*time.Second)).RWMutex(key)
	var wl *distlock.Lock
	for end := time.Now().Add(3*ttl + 2*time.Second); wl == nil; {
		if wl, err = w.TryLock(ctx); err != nil && time.Now().After(end) {
			t.Fatalf("an expired reader still keeps the writer out: %v", err)
		}
		time.Sleep(ttl / 10)
	}
	defer func() { _ = wl.Unlock(context.Background()) }()
	if err := r.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("RUnlock of an expired read lease: %v; want ErrLockLost", err)
	}
	if wl.Token() <= r.Token() {
		t.Errorf("writer's token %d not above the expired reader's %d", wl.Token(), r.Token())
	}
}
