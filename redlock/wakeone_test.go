package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/redlock"
)

// TestReleaseWakesOneWaiter: waiters refused at the key's gate node are
// enlisted there, one entry per client, and the release wakes the client
// enlisted first, by name, instead of publishing to every waiter; its
// watch fires.
func TestReleaseWakesOneWaiter(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	ctx := context.Background()
	const key = "wake-one"
	k := redisnode.KeysFor(redlock.DefaultPrefix, key)
	gate := gateOf(key, len(addrs))
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	holder := newBackend(t, addrs, slowNodes)
	if g, err := holder.Acquire(ctx, req("h")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	const waiters = 3
	watches := make([]driver.Watch, waiters)
	for i := range watches {
		b := newBackend(t, addrs, slowNodes)
		w, err := b.Watch(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		watches[i] = w
		// As a waiter does, it tries once its watch is in place.
		if g, err := b.Acquire(ctx, req("w"+string(rune('0'+i)))); err != nil || g.Acquired {
			t.Fatalf("waiter %d: Acquire = %+v, %v; want refused", i, g, err)
		}
	}
	if n := cs[gate].ZCard(ctx, k.Waiters).Val(); n != waiters {
		t.Fatalf("%d clients enlisted at the gate; want %d", n, waiters)
	}
	sub := cs[gate].Subscribe(ctx, k.Channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if err := holder.Release(ctx, req("h").Lease); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.Payload, ">") {
		t.Fatalf("the gate published %q on release; want '>' and the one client it wakes", msg.Payload)
	}
	if n := cs[gate].ZCard(ctx, k.Waiters).Val(); n != waiters-1 {
		t.Errorf("%d clients enlisted after the release; want %d", n, waiters-1)
	}
	// The clients were enlisted for the same lease: which one is first is
	// up to their ids.
	fired := make(chan int, waiters)
	done := make(chan struct{})
	defer close(done)
	for i, w := range watches {
		go func() {
			select {
			case <-w.C():
				fired <- i
			case <-done:
			}
		}()
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Error("the release woke none of the waiters")
	}
}

// TestEnlistedWaiterWaitsForName: a waiter refused at the gate and
// enlisted there is woken by name; it is told to try again only after the
// gate's fallback (250ms with no release heard), not when the holder's
// short lease would end, nor 20ms after a refusal by a holder that yields.
func TestEnlistedWaiterWaitsForName(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	ctx := context.Background()
	const key = "enlisted"
	holder, waiter := newBackend(t, addrs, slowNodes), newBackend(t, addrs, slowNodes)
	w, err := waiter.Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The holder's lease is shorter than the fallback, which is the point;
	// on a loaded machine it may run out before the grant or before the
	// waiter asks: the round is then tried again with new owners.
	const ttl = 200 * time.Millisecond
	for round := 0; ; round++ {
		if round == 20 {
			t.Fatal("in 20 rounds the waiter never found the 200ms lease held")
		}
		h := driver.Lease{Key: key, Owner: fmt.Sprintf("h%d", round)}
		g, err := holder.Acquire(ctx, driver.Request{Lease: h, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if !g.Acquired {
			continue
		}
		g, err = waiter.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: fmt.Sprintf("w%d", round)}, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired {
			waiter.Release(ctx, driver.Lease{Key: key, Owner: fmt.Sprintf("w%d", round)})
			continue
		}
		if g.RetryAfter < 250*time.Millisecond {
			t.Errorf("RetryAfter %v for a waiter enlisted at the gate; want the gate's fallback, 250ms", g.RetryAfter)
		}
		return
	}
}

// TestWatchSinceMissed: a waiter whose subscriptions were live before its
// attempt learns from WatchSince that no release went unheard, and sleeps
// at once instead of trying again after subscribing; a release between
// the attempt and the watch is reported missed.
func TestWatchSinceMissed(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	ctx := context.Background()
	const key = "marked"
	holder, waiter := newBackend(t, addrs, slowNodes), newBackend(t, addrs, slowNodes)
	mw, ok := any(waiter).(driver.MarkWatcher)
	if !ok {
		t.Fatal("the backend is no driver.MarkWatcher: every waiter tries again after subscribing")
	}
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	if mw.WatchMark(key) != 0 {
		t.Error("WatchMark is not 0 before any subscription")
	}
	// An earlier wait's subscriptions linger.
	w, err := waiter.Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()

	// An attempt as a waiter makes it: the mark first, then the attempt.
	attempt := func(owner string) uint64 {
		t.Helper()
		mark := mw.WatchMark(key)
		if mark == 0 {
			t.Fatal("WatchMark is 0 with every node subscribed")
		}
		if g, err := waiter.Acquire(ctx, req(owner)); err != nil || g.Acquired {
			t.Fatalf("Acquire = %+v, %v; want refused", g, err)
		}
		return mark
	}
	if g, err := holder.Acquire(ctx, req("h1")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	mark := attempt("w1")
	w, missed, err := mw.WatchSince(ctx, key, "", mark)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if missed {
		t.Error("WatchSince reports a release missed; none was")
	}

	mark = attempt("w2")
	if err := holder.Release(ctx, req("h1").Lease); err != nil {
		t.Fatal(err)
	}
	// The release's message reaches the waiter's subscription in time.
	deadline := time.Now().Add(5 * time.Second)
	for mw.WatchMark(key) == mark && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w, missed, err = mw.WatchSince(ctx, key, "", mark)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !missed {
		t.Error("WatchSince does not report the release between the attempt and the watch")
	}
}

// TestReleaserYieldsAtTheGate: a client whose release at the gate woke
// another client by name yields to it for a moment: its own attempt right
// after is refused, with a wait no longer than the yield, and the woken
// client takes the lock. Without the yield a worker that asks again at
// once takes the lock back before the woken one can ask.
func TestReleaserYieldsAtTheGate(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	ctx := context.Background()
	const key = "yield"
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	releaser, waiter := newBackend(t, addrs, slowNodes), newBackend(t, addrs, slowNodes)
	// Both hear the key's releases, as clients that waited for it do.
	for _, b := range []*redlock.Backend{releaser, waiter} {
		w, err := b.Watch(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
	}
	if g, err := releaser.Acquire(ctx, req("r1")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if g, err := waiter.Acquire(ctx, req("w")); err != nil || g.Acquired {
		t.Fatalf("waiter: Acquire = %+v, %v; want refused and enlisted", g, err)
	}
	if err := releaser.Release(ctx, req("r1").Lease); err != nil {
		t.Fatal(err)
	}
	g, err := releaser.Acquire(ctx, req("r2"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Acquired {
		t.Fatal("the releaser took the lock straight back from the client its release woke")
	}
	if g.RetryAfter <= 0 || g.RetryAfter > redisnode.YieldFor {
		t.Errorf("the yielding attempt says retry after %v; want at most the yield, %v", g.RetryAfter, redisnode.YieldFor)
	}
	if g, err := waiter.Acquire(ctx, req("w")); err != nil || !g.Acquired {
		t.Fatalf("the woken waiter: Acquire = %+v, %v; want granted", g, err)
	}
}
