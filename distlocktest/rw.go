package distlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// rwChecks run for backends that claim ReadWrite.
var rwChecks = []check{
	{"RWReadersShareWritersExclude", readWrite, testRWShare},
	{"RWWaitingWriterHoldsReadersOff", readWrite, testRWWriterFirst},
	{"RWWriterGivingUpLetsReadersIn", readWrite, testRWWriterGivesUp},
	{"RWReadLeaseExpires", readWrite, testRWReaderExpiry},
}

func testRWShare(t testing.TB, h Harness) {
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
	b := h.NewBackend(t)
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("reader"), Kind: driver.Read}, TTL: 10 * time.Second}
	g1, err1 := b.Acquire(ctx, req)
	g2, err2 := b.Acquire(ctx, req)
	if err1 != nil || err2 != nil || !g1.Acquired || !g2.Acquired || g1.Token != g2.Token {
		t.Errorf("repeated Acquire of a reader by one owner: %+v, %v then %+v, %v; want the same grant", g1, err1, g2, err2)
	}
	if err := b.Release(ctx, req.Lease); err != nil {
		t.Errorf("Release of a reader: %v", err)
	}
	if err := b.Release(ctx, req.Lease); err != nil {
		t.Errorf("Release of a reader repeated (its first reply lost): %v; want nil", err)
	}
	wl2, err := newClient(t, h).RWMutex(key).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock (write) after the reader left: %v", err)
	}
	if err := b.Release(ctx, req.Lease); err != nil {
		t.Errorf("Release of a reader repeated while a writer holds: %v; want nil", err)
	}
	tryFails(t, "TryRLock after a reader's repeated release, while a writer holds", newClient(t, h).RWMutex(key).TryRLock)
	_ = wl2.Unlock(ctx)
}

func testRWWriterFirst(t testing.TB, h Harness) {
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

func testRWWriterGivesUp(t testing.TB, h Harness) {
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

func testRWReaderExpiry(t testing.TB, h Harness) {
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
