package distlocktest

import (
	"context"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// reentrantChecks run for backends that claim Reentrant.
var reentrantChecks = []check{
	{"ReentrantNestedHolds", reentrant, testReentrantHolds},
	{"ReentrantRenewalCoversAllHolds", reentrant, testReentrantRenewal},
	{"ReentrantHoldNeverShortensLease", reentrant, testReentrantNoShortening},
	{"ReentrantLostReplyAddsNoHold", reentrant, testReentrantLostReply},
	{"ReentrantFair", reentrantFair, testReentrantFair},
}

// reentrantFair: backends that claim both.
func reentrantFair(c driver.Capabilities) bool { return c.Reentrant && c.Fair }

// testReentrantFair: a fair re-entrant mutex takes its first hold in turn,
// behind the waiters already in line, while further holds of the identity
// that holds it are granted at once, ahead of them: they are already in.
// On the driver, so that the order of the attempts is the test's.
func testReentrantFair(t testing.TB, h Harness) {
	b := h.NewBackend(t)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey(t)
	req := func(name, identity string) driver.Request {
		return driver.Request{
			Lease: driver.Lease{Key: key, Owner: owner(name)},
			TTL:   30 * time.Second, Fair: true, Queue: 30 * time.Second, Reentry: identity,
		}
	}
	holderID := owner("holder-identity")
	first, waiter, again, newcomer := req("first", holderID), req("waiter", owner("waiter-identity")), req("again", holderID), req("newcomer", owner("newcomer-identity"))
	for _, r := range []driver.Request{first, waiter, again, newcomer} {
		t.Cleanup(func() { _ = b.Release(context.Background(), r.Lease) })
	}
	g := acquire(t, ctx, b, first)[0]
	if w, err := b.Acquire(ctx, waiter); err != nil || w.Acquired {
		t.Fatalf("a fair waiter of another identity: %+v, %v; want refused, in line", w, err)
	}
	a, err := b.Acquire(ctx, again)
	if err != nil || !a.Acquired {
		t.Fatalf("a second hold of the identity that holds the fair lock: %+v, %v; want granted at once, ahead of the line", a, err)
	}
	if a.Token != g.Token {
		t.Errorf("the second hold has token %d; want the lease's %d", a.Token, g.Token)
	}
	for _, l := range []driver.Lease{again.Lease, first.Lease} {
		if err := b.Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	// Free, and the waiter is next: a newcomer's first hold waits its turn.
	if n, err := b.Acquire(ctx, newcomer); err != nil || n.Acquired {
		t.Fatalf("a new identity's first hold while a fair waiter is next: %+v, %v; want refused", n, err)
	}
	w, err := b.Acquire(ctx, waiter)
	if err != nil || !w.Acquired {
		t.Fatalf("the waiter, first in line, on a free lock: %+v, %v; want granted", w, err)
	}
	if w.Token <= g.Token {
		t.Errorf("the waiter's token %d; want above %d", w.Token, g.Token)
	}
}

// testReentrantHolds: an owner identity enters the lock it holds again, by
// context or by option and from another client (a hand-over), with the
// same token; other owners stay out until the last hold is released.
func testReentrantHolds(t testing.TB, h Harness) {
	key := uniqueKey(t)
	id := distlock.NewOwnerID()
	ctx := distlock.ContextWithOwner(timeout(t, 10*time.Second), id)
	c := newClient(t, h)
	outer := mustLockIn(t, ctx, c.Mutex(key))
	handed, err := newClient(t, h).Mutex(key, distlock.WithOwner(id)).TryLock(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock by the same identity on another client: %v; want a second hold", err)
	}
	inner, err := c.Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock by the same identity: %v; want a third hold at once", err)
	}
	for _, l := range []*distlock.Lock{handed, inner} {
		if l.Token() != outer.Token() {
			t.Errorf("a nested hold has token %d; want the lease's %d", l.Token(), outer.Token())
		}
	}
	checkHeld(t, inspect(t, c, key), distlock.KindMutex, 3, outer.Token(), distlock.DefaultTTL)
	others := map[string]*distlock.Mutex{
		"no identity":      newClient(t, h).Mutex(key),
		"another identity": newClient(t, h).Mutex(key, distlock.WithOwner(distlock.NewOwnerID())),
	}
	excluded := func(why string) {
		t.Helper()
		for name, m := range others {
			tryFails(t, why+": TryLock with "+name, m.TryLock)
		}
	}
	excluded("three holds")
	for i, l := range []*distlock.Lock{outer, handed} { // in any order
		if err := l.Unlock(timeout(t, 5*time.Second)); err != nil {
			t.Fatalf("Unlock of hold %d: %v", i+1, err)
		}
		if err := inner.Err(); err != nil {
			t.Fatalf("unlocking another hold ended this one: %v", err)
		}
		excluded("holds left")
	}
	checkHeld(t, inspect(t, c, key), distlock.KindMutex, 1, outer.Token(), distlock.DefaultTTL)
	got := make(chan *distlock.Lock, 1)
	go func() {
		l, err := others["no identity"].Lock(timeout(t, 10*time.Second))
		if err != nil {
			t.Errorf("a waiter of another owner: %v", err)
		}
		got <- l
	}()
	time.Sleep(50 * time.Millisecond)
	if err := inner.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock of the last hold: %v", err)
	}
	select {
	case l := <-got:
		if l == nil {
			return
		}
		if l.Token() <= outer.Token() {
			t.Errorf("the next owner's token %d is not above the re-entrant lease's %d", l.Token(), outer.Token())
		}
		_ = l.Unlock(context.Background())
	case <-time.After(10 * time.Second):
		t.Fatalf("the last Unlock did not free the lock for another owner")
	}
}

// testReentrantRenewal: with several holds, the watchdogs keep the lease
// past its TTL, any hold's renewal covers the others, and the last one
// keeps the lease alone.
func testReentrantRenewal(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.renewalTTL()
	ctx := distlock.ContextWithOwner(timeout(t, 10*ttl), distlock.NewOwnerID())
	m := newClient(t, h, distlock.WithTTL(ttl)).Mutex(key)
	a := mustLockIn(t, ctx, m)
	b := mustLockIn(t, ctx, m)
	time.Sleep(4 * ttl)
	for _, l := range []*distlock.Lock{a, b} {
		if err := l.Err(); err != nil {
			t.Fatalf("a hold ended while the watchdogs ran: %v", err)
		}
	}
	assertHeld(t, h, key, "after 4 TTLs with two holds")
	if err := a.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock of the first hold: %v", err)
	}
	time.Sleep(3 * ttl)
	if err := b.Err(); err != nil {
		t.Fatalf("the remaining hold ended: %v", err)
	}
	assertHeld(t, h, key, "3 TTLs after the first hold left")
	if err := b.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Errorf("Unlock of the last hold: %v", err)
	}

	// On the driver: renewing one hold renews the lease for the other.
	bk := h.NewBackend(t)
	dctx := timeout(t, 10*time.Second)
	dkey, reentry := uniqueKey(t), owner("identity")
	hold := func(name string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: dkey, Owner: owner(name)}, TTL: ttl, Reentry: reentry}
	}
	one, two := hold("one"), hold("two")
	acquire(t, dctx, bk, one, two)
	time.Sleep(ttl / 2)
	if _, err := bk.Refresh(dctx, one.Lease, 10*time.Second); err != nil {
		t.Fatalf("Refresh of one hold: %v", err)
	}
	time.Sleep(ttl) // past the other hold's own TTL
	if _, err := bk.Refresh(dctx, two.Lease, 10*time.Second); err != nil {
		t.Errorf("Refresh of the other hold after its TTL, though the lease was renewed: %v; want the renewal to cover every hold", err)
	}
}

// testReentrantNoShortening: a nested hold with a shorter TTL, or its
// renewal, does not cut the lease another hold was granted.
func testReentrantNoShortening(t testing.TB, h Harness) {
	key := uniqueKey(t)
	ttl := h.ttl()
	b := h.NewBackend(t)
	ctx := timeout(t, 10*time.Second)
	reentry := owner("identity")
	long := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("long")}, TTL: 10 * time.Second, Reentry: reentry}
	short := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("short")}, TTL: ttl, Reentry: reentry}
	acquire(t, ctx, b, long, short)
	if _, err := b.Refresh(ctx, short.Lease, ttl); err != nil {
		t.Fatalf("Refresh of the short hold: %v", err)
	}
	time.Sleep(2 * ttl)
	if _, err := b.Refresh(ctx, long.Lease, 10*time.Second); err != nil {
		t.Errorf("the long hold's lease was cut by a shorter nested hold: Refresh: %v", err)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || !info.Held || info.TTL < 5*time.Second {
		t.Errorf("Inspect after a short nested hold: %+v, %v; want held, with most of 10s left", info, err)
	}
}

// testReentrantLostReply: a nested acquisition repeated after a lost reply
// is the same hold, not one more; a repeated release of a hold releases
// nothing else; the last release frees the key.
func testReentrantLostReply(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 10*time.Second)
	reentry := owner("identity")
	outer := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("outer")}, TTL: 10 * time.Second, Reentry: reentry}
	nested := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("nested")}, TTL: 10 * time.Second, Reentry: reentry}
	stranger := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("stranger")}, TTL: 10 * time.Second}
	defer func() {
		for _, r := range []driver.Request{outer, nested, stranger} {
			_ = b.Release(context.Background(), r.Lease)
		}
	}()
	g, err := b.Acquire(ctx, outer)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	for i := range 2 { // the second is the repeat of an attempt whose reply was lost
		n, err := b.Acquire(ctx, nested)
		if err != nil || !n.Acquired || n.Token != g.Token {
			t.Fatalf("nested Acquire (sending %d): %+v, %v; want granted with token %d", i+1, n, err, g.Token)
		}
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Holds != 2 {
		t.Errorf("Inspect after a nested Acquire and its repeat: %d holds, %v; want 2", info.Holds, err)
	}
	for i := range 2 { // the second is a repeat after a lost reply
		if err := b.Release(ctx, nested.Lease); err != nil {
			t.Errorf("Release of the nested hold (sending %d): %v; want nil", i+1, err)
		}
	}
	if s, err := b.Acquire(ctx, stranger); err != nil || s.Acquired {
		t.Fatalf("Acquire by another owner while the outer hold is left: %+v, %v; want refused", s, err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || !info.Held || info.Holds != 1 {
		t.Errorf("Inspect with the outer hold left: held %v, %d holds, %v; want 1", info.Held, info.Holds, err)
	}
	if err := b.Release(ctx, outer.Lease); err != nil {
		t.Fatalf("Release of the outer hold: %v", err)
	}
	s, err := b.Acquire(ctx, stranger)
	if err != nil || !s.Acquired {
		t.Errorf("Acquire after every hold was released: %+v, %v; want granted (a repeated nested Acquire must not add a hold)", s, err)
	}
}
