package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestReentrantFair: a fair re-entrant lock takes its first hold in
// turn, behind the fair waiters that queued before it and ahead of those
// after it; while it holds, further holds of its identity are granted at
// once, waiters or not; a request of the identity that does not wait is
// refused while the identity only waits; and an identity that gives up
// its place leaves none in the way.
func TestReentrantFair(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b1, b2 := newBackend(t, c), newBackend(t, c)
	ctx := timeout(t, time.Minute)
	key := uniqueKey("reentrant-fair")
	const ttl = 10 * time.Second
	fair := func(name, reentry string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(name)}, TTL: ttl, Fair: true, Queue: ttl, Reentry: reentry}
	}
	try := func(b interface {
		Acquire(context.Context, driver.Request) (driver.Grant, error)
	}, req driver.Request, want bool) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, req)
		if err != nil || g.Acquired != want {
			t.Fatalf("Acquire %s: %+v, %v; want acquired %v", req.Owner, g, err, want)
		}
		return g
	}
	release := func(b interface {
		Release(context.Context, driver.Lease) error
	}, req driver.Request) {
		t.Helper()
		if err := b.Release(ctx, req.Lease); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("Release %s: %v", req.Owner, err)
		}
	}
	holder, w1, id1, w2 := fair("holder", ""), fair("w1", ""), fair("id1", "identity"), fair("w2", "")
	try(b1, holder, true)
	try(b2, w1, false)
	try(b1, id1, false) // in line behind w1
	try(b2, w2, false)  // behind the identity
	tryNow := fair("id-now", "identity")
	tryNow.Queue = 0
	try(b2, tryNow, false) // the identity waits: nothing held to enter
	release(b1, holder)
	try(b1, id1, false) // w1's turn first
	try(b2, w2, false)
	gw1 := try(b2, w1, true)
	release(b2, w1)
	try(b2, w2, false) // the identity's turn, not w2's
	g := try(b1, id1, true)
	if g.Token <= gw1.Token {
		t.Errorf("the identity's token %d is not above the previous holder's %d", g.Token, gw1.Token)
	}
	// Further holds of the holding identity: at once, past w2, through
	// either backend, waiting or not.
	id2 := fair("id2", "identity")
	if g2 := try(b2, id2, true); g2.Token != g.Token {
		t.Errorf("a further hold has token %d; want the identity's %d", g2.Token, g.Token)
	}
	tryNow.Owner = uniqueKey("id-now")
	try(b1, tryNow, true)
	release(b1, tryNow)
	release(b2, id2)
	try(b2, w2, false)
	release(b1, id1)
	gw2 := try(b2, w2, true)

	// An identity that gives up its place in line leaves no place behind:
	// the next waiter's turn comes with the holder's release.
	id3, w3 := fair("id3", "other identity"), fair("w3", "")
	try(b1, id3, false)
	try(b2, w3, false)
	release(b1, id3)
	release(b2, w2)
	if g3 := try(b2, w3, true); g3.Token <= gw2.Token {
		t.Errorf("token %d is not above the previous holder's %d", g3.Token, gw2.Token)
	}
	release(b2, w3)
}

// TestReentrantFairWatch: the Watch of an owner whose re-entrant identity
// waits in line fires when the key just before the identity's place is
// deleted, not for a release further ahead.
func TestReentrantFairWatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := newBackend(t, c)
	ctx := timeout(t, time.Minute)
	key := uniqueKey("reentrant-fair-watch")
	const ttl = 10 * time.Second
	fair := func(name, reentry string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(name)}, TTL: ttl, Fair: true, Queue: ttl, Reentry: reentry}
	}
	holder, w1, id := fair("holder", ""), fair("w1", ""), fair("id", "identity")
	for i, req := range []driver.Request{holder, w1, id} {
		if g, err := b.Acquire(ctx, req); err != nil || g.Acquired != (i == 0) {
			t.Fatalf("Acquire %d: %+v, %v", i, g, err)
		}
	}
	w, err := b.Watch(ctx, key, id.Owner)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	if err := b.Release(ctx, holder.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-w.C():
		t.Fatalf("the identity's Watch fired for the release of the holder, ahead of the waiter before it")
	case <-time.After(time.Second):
	}
	if g, err := b.Acquire(ctx, w1); err != nil || !g.Acquired {
		t.Fatalf("Acquire of the first waiter: %+v, %v", g, err)
	}
	if err := b.Release(ctx, w1.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("the identity's Watch did not fire 10s after the waiter before it released")
	}
	if g, err := b.Acquire(ctx, id); err != nil || !g.Acquired {
		t.Fatalf("Acquire of the identity in its turn: %+v, %v", g, err)
	}
}
