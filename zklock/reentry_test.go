package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// testReentrantOutlivesSession: a re-entrant lease handed to another
// client stays held when the session of the client that made its node
// ends, and ends at its TTL once no hold renews it.
func testReentrantOutlivesSession(t *testing.T, addrs []string) {
	key := "reentrant-outlives-session"
	ctx := ctxFor(t, 20*time.Second)
	const ttl = time.Second
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: ttl, Reentry: "identity-outlives"}
	}
	makerConn := dial(t, addrs, sessionTimeout)
	maker := zklock.New(makerConn, sessionTimeout)
	first, err := maker.Acquire(ctx, req("maker"))
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire: %+v, %v", first, err)
	}
	heir := newBackend(t, addrs, sessionTimeout)
	handed, err := heir.Acquire(ctx, req("heir"))
	if err != nil || !handed.Acquired || handed.Token != first.Token {
		t.Fatalf("Acquire by the same identity on another client: %+v, %v; want granted with token %d", handed, err, first.Token)
	}
	// The maker's client goes away without releasing: its session ends.
	makerConn.Close()
	stranger := newBackend(t, addrs, sessionTimeout)
	other := driver.Request{Lease: driver.Lease{Key: key, Owner: "stranger"}, TTL: ttl}
	for range 3 {
		time.Sleep(ttl / 2)
		if _, err := heir.Refresh(ctx, req("heir").Lease, ttl); err != nil {
			t.Fatalf("Refresh of the handed hold: %v; want it held", err)
		}
		if g, err := stranger.Acquire(ctx, other); err != nil || g.Acquired {
			t.Fatalf("Acquire by another owner while a hold is renewed: %+v, %v; want refused", g, err)
		}
	}
	// No one renews it any more: it ends at its TTL.
	deadline := time.Now().Add(ttl + 5*time.Second)
	for {
		g, err := stranger.Acquire(ctx, other)
		if err == nil && g.Acquired {
			if g.Token <= first.Token {
				t.Errorf("the next token %d is not above the re-entrant lease's %d", g.Token, first.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire %v after the last renewal: %+v, %v; want granted once the lease lapsed", ttl+5*time.Second, g, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := heir.Refresh(ctx, req("heir").Lease, ttl); err == nil {
		t.Error("Refresh of a hold whose lease lapsed and was taken over succeeded")
	}
}

// testReentrantLostJoinReply: the reply to a hold joining the identity's
// node is lost; the retry finds the hold, and adds no other.
func testReentrantLostJoinReply(t *testing.T, addrs []string) {
	p := testserver.StartProxy(t, addrs[0])
	b := newBackend(t, []string{p.Addr()}, sessionTimeout)
	key := "reentrant-lost-join-reply"
	ctx := ctxFor(t, 30*time.Second)
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 20 * time.Second, Reentry: "identity-lost-join"}
	}
	outer, joiner := req("outer-0123456789abcdef"), req("joiner-0123456789abcdef")
	g, err := b.Acquire(ctx, outer)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	dropped := p.DropReply(zklock.OwnerHash(joiner.Owner))
	if j, err := b.Acquire(ctx, joiner); err == nil {
		t.Fatalf("Acquire with its reply dropped: %+v, nil error", j)
	}
	select {
	case <-dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy saw no write of the joining hold")
	}
	var j driver.Grant
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if j, err = b.Acquire(ctxFor(t, 5*time.Second), joiner); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || !j.Acquired || j.Token != g.Token {
		t.Fatalf("retried Acquire: %+v, %v; want granted with token %d", j, err, g.Token)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Holds != 2 {
		t.Fatalf("Inspect after the retry: %+v, %v; want 2 holds", info, err)
	}
	for _, r := range []driver.Request{joiner, outer} {
		if err := b.Release(ctx, r.Lease); err != nil {
			t.Fatalf("Release of %s: %v", r.Owner, err)
		}
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect after both releases: %+v, %v; want free", info, err)
	}
}

// testReentrantFair: a fair re-entrant mutex takes its first hold in
// turn, queued behind the holder and ahead of those who came later, and
// each further hold of its identity, while it holds, at once, even with
// waiters in line behind it.
func testReentrantFair(t *testing.T, addrs []string) {
	key := "reentrant-fair"
	ctx := ctxFor(t, 60*time.Second)
	newClient := func(opts ...distlock.Option) *distlock.Client {
		return distlock.New(newBackend(t, addrs, sessionTimeout), append(opts, distlock.WithFairness(), distlock.WithTTL(30*time.Second))...)
	}
	waitLine := func(n int) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); len(children(t, addrs, key)) != n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the line is %v; want %d nodes", children(t, addrs, key), n)
			}
		}
	}
	first, err := newClient().Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	id := distlock.NewOwnerID()
	reentrant := newClient(distlock.WithOwner(id)).Mutex(key)
	outer := make(chan *distlock.Lock, 1)
	go func() {
		l, err := reentrant.Lock(ctx)
		if err != nil {
			t.Errorf("the re-entrant mutex's first Lock: %v", err)
		}
		outer <- l
	}()
	waitLine(2)
	later := make(chan *distlock.Lock, 1)
	go func() {
		l, err := newClient().Mutex(key).Lock(ctx)
		if err != nil {
			t.Errorf("the later waiter's Lock: %v", err)
		}
		later <- l
	}()
	waitLine(3)
	if err := first.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	o := <-outer
	if o == nil {
		t.FailNow()
	}
	inner, err := reentrant.Lock(ctxFor(t, 20*time.Second))
	if err != nil {
		t.Fatalf("a further hold of the re-entrant mutex, with a waiter in line: %v; want it at once", err)
	}
	if inner.Token() != o.Token() {
		t.Errorf("the further hold's token %d; want the first hold's %d", inner.Token(), o.Token())
	}
	select {
	case <-later:
		t.Fatal("the later waiter got the lock while the re-entrant mutex held it")
	default:
	}
	for _, l := range []*distlock.Lock{inner, o} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if l := <-later; l == nil || l.Token() <= o.Token() {
		t.Errorf("the later waiter's lock %v; want it after the re-entrant mutex, with a higher token", l)
	} else {
		_ = l.Unlock(ctx)
	}
}
