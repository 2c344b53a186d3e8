package etcdlock_test

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestReentrantLostReply: the reply of the first hold's acquisition, of a
// nested hold's, then of the nested hold's release, is lost after etcd
// applied the request. A repeated Acquire reports the same grant and adds
// no hold; the repeated Release reports success and leaves the outer
// hold, whose release alone frees the lock.
func TestReentrantLostReply(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	proxy := testserver.StartProxy(t, c.Members[0].Addr())
	b := etcdlock.New(dialFixedWindows(t, proxy.Addr()))
	t.Cleanup(func() { _ = b.Close() })
	admin := c.Client(t)
	ctx := timeout(t, 60*time.Second)
	key, reentry := uniqueKey("re-lostreply"), uniqueKey("identity")
	req := func(owner string) driver.Request {
		// Long enough that the identity's deadline cannot pass: the test
		// renews nothing.
		return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(owner)}, TTL: 30 * time.Second, Reentry: reentry}
	}
	holds := func() int64 {
		t.Helper()
		resp, err := admin.Get(ctx, holdPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return resp.Count
	}
	held := func(owner string) bool {
		t.Helper()
		resp, err := admin.Get(ctx, holdPrefix(key)+url.PathEscape(owner), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return resp.Count > 0
	}
	// lose calls call with its reply lost (its first request is the first
	// to contain the owner that prepare returns), until a call was
	// applied, as applied tells, and returns once b's client reconnected.
	lose := func(what string, prepare func() string, call func() error, applied func() bool) {
		t.Helper()
		for try := 0; ; try++ {
			if try == 20 {
				t.Fatalf("%s: in 20 tries, no reply was lost after its request was applied", what)
			}
			dropped := proxy.DropReply(prepare())
			if err := call(); err == nil {
				t.Fatalf("%s with its reply dropped: no error", what)
			}
			select {
			case <-dropped:
			default:
				t.Fatalf("%s: no reply was dropped", what)
			}
			time.Sleep(200 * time.Millisecond) // a request in flight lands
			for {
				if _, err := b.Inspect(ctx, key); err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if applied() {
				return
			}
		}
	}

	// The first hold's reply lost: the repeat finds the lease it made.
	var outer driver.Request
	lose("first Acquire", func() string {
		outer = req("outer")
		return outer.Owner
	}, func() error {
		_, err := b.Acquire(ctx, outer)
		return err
	}, func() bool {
		if held(outer.Owner) {
			return true
		}
		_ = b.Release(ctx, outer.Lease)
		return false
	})
	g, err := b.Acquire(ctx, outer)
	if err != nil || !g.Acquired {
		t.Fatalf("first Acquire repeated after its lost reply: %+v, %v; want granted", g, err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Holds != 1 || info.Token != g.Token {
		t.Errorf("Inspect: %+v, %v; want 1 hold, token %d", info, err, g.Token)
	}
	var nested driver.Request
	lose("nested Acquire", func() string {
		nested = req("nested") // a new owner: an attempt not applied is forgotten
		return nested.Owner
	}, func() error {
		_, err := b.Acquire(ctx, nested)
		return err
	}, func() bool {
		if held(nested.Owner) {
			return true
		}
		_ = b.Release(ctx, nested.Lease) // not applied: forget it
		return false
	})
	n, err := b.Acquire(ctx, nested)
	if err != nil || !n.Acquired || n.Token != g.Token {
		t.Fatalf("nested Acquire repeated after its lost reply: %+v, %v; want granted with token %d", n, err, g.Token)
	}
	if got := holds(); got != 2 {
		t.Errorf("hold keys after a nested Acquire and its repeat: %d; want 2", got)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Holds != 2 || info.Token != g.Token {
		t.Errorf("Inspect: %+v, %v; want 2 holds, token %d", info, err, g.Token)
	}

	lose("nested Release", func() string { return nested.Owner }, func() error { return b.Release(ctx, nested.Lease) },
		func() bool { return !held(nested.Owner) })
	if err := b.Release(ctx, nested.Lease); err != nil {
		t.Errorf("nested Release repeated after its lost reply: %v; want nil", err)
	}
	if got := holds(); got != 1 || !held(outer.Owner) {
		t.Errorf("hold keys after the nested Release and its repeat: %d (outer's there: %v); want the outer one", got, held(outer.Owner))
	}
	other := newBackend(t, c)
	stranger := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("stranger")}, TTL: 10 * time.Second}
	if s, err := other.Acquire(ctx, stranger); err != nil || s.Acquired {
		t.Fatalf("Acquire by another owner while the outer hold is left: %+v, %v; want refused", s, err)
	}
	if err := b.Release(ctx, outer.Lease); err != nil {
		t.Fatalf("Release of the outer hold: %v", err)
	}
	s, err := other.Acquire(ctx, stranger)
	if err != nil || !s.Acquired || s.Token <= g.Token {
		t.Fatalf("Acquire by another owner after the last hold's Release: %+v, %v; want granted, token above %d", s, err, g.Token)
	}
	_ = other.Release(ctx, stranger.Lease)
	if got := holds(); got != 0 {
		t.Errorf("hold keys left: %d", got)
	}
}

// TestReentrantHandOver: a re-entrant lock taken on one backend is handed
// to another (the same identity, another client), and the first backend
// closes, having released its hold or not. The identity's lease, kept
// alive by the second backend, outlives the first backend by many TTLs;
// the lock is free once the last live hold is released (at once), or
// once the lease of a hold nobody keeps ends (within its TTL).
func TestReentrantHandOver(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	const ttl = 2 * time.Second
	for _, released := range []bool{true, false} {
		name := "first hold released"
		if !released {
			name = "first backend gone holding"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := timeout(t, 60*time.Second)
			key, id := uniqueKey("handover"), distlock.NewOwnerID()
			first := newBackend(t, c)
			outer, err := distlock.New(first, distlock.WithTTL(ttl)).Mutex(key, distlock.WithOwner(id)).Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			handed, err := distlock.New(newBackend(t, c), distlock.WithTTL(ttl)).Mutex(key, distlock.WithOwner(id)).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock by the same identity on another backend: %v", err)
			}
			if handed.Token() != outer.Token() {
				t.Errorf("handed hold's token %d; want the lease's %d", handed.Token(), outer.Token())
			}
			if released {
				if err := outer.Unlock(ctx); err != nil {
					t.Fatalf("Unlock of the first hold: %v", err)
				}
			}
			if err := first.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			time.Sleep(3 * ttl) // the first backend renews nothing any more
			if err := handed.Err(); err != nil {
				t.Fatalf("the handed hold ended after the first backend closed: %v", err)
			}
			other := distlock.New(newBackend(t, c), distlock.WithTTL(ttl))
			if l, err := other.Mutex(key).TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
				if l != nil {
					_ = l.Unlock(ctx)
				}
				t.Fatalf("TryLock by another owner while the lock is handed: %v; want ErrNotObtained", err)
			}
			holds := 1
			if !released {
				holds = 2 // the first backend's is still there, on the lease
			}
			if info, err := other.Inspect(ctx, key); err != nil || !info.Held || info.Holds != holds || info.Token != outer.Token() {
				t.Errorf("Inspect: %+v, %v; want held, %d holds, token %d", info, err, holds, outer.Token())
			}
			if err := handed.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the handed hold: %v", err)
			}
			unlocked := time.Now()
			bound := time.Second
			if !released {
				bound += ttl + time.Second // the lease ends, and etcd checks every 500ms
			}
			for {
				l, err := other.Mutex(key).TryLock(ctx)
				if err == nil {
					if l.Token() <= outer.Token() {
						t.Errorf("the next owner's token %d is not above the re-entrant lease's %d", l.Token(), outer.Token())
					}
					t.Logf("another owner got the lock %v after the last live hold was released", time.Since(unlocked).Round(time.Millisecond))
					_ = l.Unlock(ctx)
					return
				}
				if !errors.Is(err, distlock.ErrNotObtained) {
					t.Fatalf("TryLock: %v", err)
				}
				if time.Since(unlocked) > bound {
					t.Fatalf("the lock is still held %v after the last live hold was released", bound)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestReentrantHoldsLapse: holds that are not renewed end at their TTL
// while their backend lives, and only that backend's: another backend's
// renewed hold of the identity keeps the lock, and the lock is free once
// that one is released. Alone, the unrenewed holds free the lock at
// their TTL.
func TestReentrantHoldsLapse(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	const ttl = 2 * time.Second
	ctx := timeout(t, 60*time.Second)
	key, id := uniqueKey("re-lapse"), distlock.NewOwnerID()
	lazy := distlock.New(newBackend(t, c), distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex(key, distlock.WithOwner(id))
	for range 2 {
		if _, err := lazy.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
	}
	renewed, err := distlock.New(newBackend(t, c), distlock.WithTTL(ttl)).Mutex(key, distlock.WithOwner(id)).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on another backend: %v", err)
	}
	time.Sleep(2 * ttl)
	resp, err := admin.Get(ctx, holdPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Errorf("hold keys 2 TTLs on: %v, %v; want the renewed one", resp.Count, err)
	}
	if err := renewed.Err(); err != nil {
		t.Fatalf("the renewed hold ended: %v", err)
	}
	other := distlock.New(newBackend(t, c)).Mutex(key)
	if l, err := other.TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("TryLock by another owner while a renewed hold is left: %v; want ErrNotObtained", err)
	}
	if err := renewed.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	l, err := other.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the last hold's release: %v", err)
	}
	_ = l.Unlock(ctx)

	// Alone: the lock is free at the holds' TTL, though the backend,
	// and its keep-alive of the identity's lease, live on.
	start := time.Now()
	if _, err := lazy.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	for {
		l, err := other.TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			break
		}
		if since := time.Since(start); since > ttl+time.Second {
			t.Fatalf("the lock is still held %v after an unrenewed hold of TTL %v: %v", since.Round(time.Millisecond), ttl, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(start); since < ttl {
		t.Errorf("another owner got the lock %v after a hold of TTL %v", since, ttl)
	}
}

// TestReentrantUnsupported: a re-entrant request that is not for a
// mutex is refused with errors.ErrUnsupported, before anything is sent.
func TestReentrantUnsupported(t *testing.T) {
	t.Parallel()
	b := newBackend(t, etcdtest.Start(t))
	ctx := timeout(t, 10*time.Second)
	for _, req := range []driver.Request{
		{Lease: driver.Lease{Key: "k", Owner: "o", Kind: driver.Read}, TTL: time.Second, Reentry: "id"},
	} {
		if _, err := b.Acquire(ctx, req); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Acquire(fair %v, kind %v) with Reentry: %v; want errors.ErrUnsupported", req.Fair, req.Kind, err)
		}
	}
}

// TestReentrantConcurrentHolds: holds of one identity taken at once, by
// goroutines of two backends, on a free key: one makes the lease and the
// others join it; every one is granted with the same token and a live
// Grant.Lost, and the last release frees the key.
func TestReentrantConcurrentHolds(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	backends := []*etcdlock.Backend{newBackend(t, c), newBackend(t, c)}
	ctx := timeout(t, 30*time.Second)
	for round := range 5 {
		key, reentry := uniqueKey("re-concurrent"), uniqueKey("identity")
		const perBackend = 4
		reqs := make([]driver.Request, 2*perBackend)
		grants := make([]driver.Grant, len(reqs))
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i := range reqs {
			reqs[i] = driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("owner")}, TTL: 10 * time.Second, Reentry: reentry}
			wg.Go(func() { grants[i], errs[i] = backends[i%2].Acquire(ctx, reqs[i]) })
		}
		wg.Wait()
		for i, g := range grants {
			if errs[i] != nil || !g.Acquired || g.Token != grants[0].Token {
				t.Fatalf("round %d: hold %d: %+v, %v; want granted with token %d", round, i, g, errs[i], grants[0].Token)
			}
			select {
			case <-g.Lost:
				t.Fatalf("round %d: hold %d granted lost", round, i)
			default:
			}
		}
		if info, err := backends[0].Inspect(ctx, key); err != nil || info.Holds != len(reqs) {
			t.Fatalf("round %d: Inspect: %+v, %v; want %d holds", round, info, err, len(reqs))
		}
		for i, r := range reqs {
			if err := backends[i%2].Release(ctx, r.Lease); err != nil {
				t.Fatalf("round %d: Release of hold %d: %v", round, i, err)
			}
		}
		if info, err := backends[0].Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("round %d: Inspect after every release: %+v, %v; want free", round, info, err)
		}
	}
}

// TestReentrantRefreshSeesBreak: after Break has returned, refreshing any
// hold of a re-entrant lease reports ErrNotHeld, whichever member the
// client reads from. The check was a transaction with conditions and no
// operation, which etcd serves as a serializable read from the member the
// client reached: on a 3-member cluster, one refresh in about eight found
// the broken holds still there.
func TestReentrantRefreshSeesBreak(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	b := newBackend(t, c)
	ctx := timeout(t, 2*time.Minute)
	for round := range 40 {
		key := uniqueKey("break")
		var reqs []driver.Request
		for i := range 2 {
			reqs = append(reqs, driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(fmt.Sprint("hold", i))},
				TTL: 10 * time.Second, Reentry: "identity-" + key})
			if g, err := b.Acquire(ctx, reqs[i]); err != nil || !g.Acquired {
				t.Fatalf("round %d: Acquire of hold %d: %+v, %v", round, i, g, err)
			}
		}
		if _, err := b.Break(ctx, key); err != nil {
			t.Fatalf("round %d: Break: %v", round, err)
		}
		for i, r := range reqs {
			if _, err := b.Refresh(ctx, r.Lease, 10*time.Second); !errors.Is(err, driver.ErrNotHeld) {
				t.Fatalf("round %d: Refresh of hold %d after Break: %v; want ErrNotHeld", round, i, err)
			}
		}
	}
}
