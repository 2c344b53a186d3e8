package etcdlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/internal/testserver"
)

func uniqueKey(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestLeaderKilled: the leader dies while a lock is held and another
// client waits; the holder keeps the lock through the election, the
// waiter gets it after the release, and tokens keep increasing, also
// after the dead member comes back.
func TestLeaderKilled(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	key := uniqueKey("leader")
	opts := []distlock.Option{distlock.WithTTL(5 * time.Second), distlock.WithFairness()}
	a := distlock.New(newBackend(t, c), opts...).Mutex(key)
	b := distlock.New(newBackend(t, c), opts...).Mutex(key)
	ctx := timeout(t, 60*time.Second)
	la, err := a.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	got := make(chan *distlock.Lock, 1)
	go func() {
		l, err := b.Lock(ctx)
		if err != nil {
			t.Errorf("waiting Lock: %v", err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond) // b waits in line
	leader := c.Leader(t)
	leader.Kill()
	time.Sleep(6 * time.Second) // past a whole TTL: renewals went on through the election
	if err := la.Err(); err != nil {
		t.Fatalf("holder lost the lock when the leader died: %v", err)
	}
	select {
	case <-got:
		t.Fatalf("the waiter got the lock while it was held")
	default:
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	var lb *distlock.Lock
	select {
	case lb = <-got:
	case <-time.After(15 * time.Second):
		t.Fatalf("waiter not granted 15s after the release")
	}
	if lb == nil {
		t.FailNow()
	}
	if lb.Token() <= la.Token() {
		t.Errorf("token after the election %d, not above the one before %d", lb.Token(), la.Token())
	}
	leader.Restart()
	if err := lb.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// A client of the restarted member only.
	one := etcdlock.New(etcdtest.Dial(t, leader.Addr()))
	t.Cleanup(func() { _ = one.Close() })
	lc, err := distlock.New(one).Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock through the restarted member: %v", err)
	}
	if lc.Token() <= lb.Token() {
		t.Errorf("token through the restarted member %d, not above the previous %d", lc.Token(), lb.Token())
	}
	_ = lc.Unlock(ctx)
}

// TestPartitionedHolder: the holder's network to the cluster goes silent.
// Its lock ends by its deadline: Done closes by ValidUntil (and a timer's
// slack), before another client gets the lock, which happens only once
// etcd expired the holder's lease, never while the holder's handle was
// still valid.
func TestPartitionedHolder(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	proxy := testserver.StartProxy(t, c.Members[0].Addr())
	const ttl = 2 * time.Second
	cut := etcdlock.New(etcdtest.Dial(t, proxy.Addr()))
	t.Cleanup(func() { _ = cut.Close() })
	key := uniqueKey("partition")
	ctx := timeout(t, 60*time.Second)
	holder, err := distlock.New(cut, distlock.WithTTL(ttl)).Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	work := holder.Context(context.Background())
	doneAt := make(chan time.Time, 1)
	go func() {
		<-holder.Done()
		doneAt <- time.Now()
	}()
	time.Sleep(ttl) // a few renewals
	proxy.Blackhole()
	defer proxy.Restore()
	cutAt := time.Now()

	other := distlock.New(newBackend(t, c), distlock.WithTTL(10*time.Second)).Mutex(key)
	var taken *distlock.Lock
	var validUntil time.Time
	for taken == nil {
		validUntil = holder.ValidUntil()
		l, err := other.TryLock(ctx)
		switch {
		case err == nil:
			taken = l
		case !errors.Is(err, distlock.ErrNotObtained):
			t.Fatalf("TryLock: %v", err)
		case time.Since(cutAt) > 4*ttl:
			t.Fatalf("no other client got the lock %v after the holder was cut off (TTL %v)", time.Since(cutAt), ttl)
		default:
			time.Sleep(50 * time.Millisecond)
		}
	}
	takenAt := time.Now()
	defer func() { _ = taken.Unlock(context.Background()) }()
	if takenAt.Before(validUntil) {
		t.Errorf("another client got the lock %v before the cut-off holder's deadline", validUntil.Sub(takenAt))
	}
	// The timers of the handle may fire a little late on a loaded
	// machine (and under -race); a renewal confirmed late only moves the
	// deadline later, which ValidUntil shows.
	const slack = 100 * time.Millisecond
	var closedAt time.Time
	select {
	case closedAt = <-doneAt:
	default:
		t.Fatalf("holder's Done still open when another client got the lock")
	}
	if final := holder.ValidUntil(); closedAt.After(final.Add(slack)) {
		t.Errorf("holder's Done closed %v after its ValidUntil", closedAt.Sub(final))
	}
	if !closedAt.Before(takenAt) {
		t.Errorf("holder's Done closed %v after another client got the lock", closedAt.Sub(takenAt))
	}
	if !errors.Is(holder.Err(), distlock.ErrLockLost) {
		t.Errorf("holder's Err() = %v; want ErrLockLost", holder.Err())
	}
	if !errors.Is(context.Cause(work), distlock.ErrLockLost) {
		t.Errorf("holder's Context cause = %v; want ErrLockLost", context.Cause(work))
	}
	if taken.Token() <= holder.Token() {
		t.Errorf("token %d after the partition, not above the holder's %d", taken.Token(), holder.Token())
	}
	// A resource fenced with the tokens refuses the cut-off holder's late
	// write once the new holder wrote: package fence works unchanged.
	var guard fence.Guard
	if err := guard.Do("resource", taken.Token(), func() error { return nil }); err != nil {
		t.Errorf("the new holder's write: %v", err)
	}
	if err := guard.Do("resource", holder.Token(), func() error { return nil }); err == nil {
		t.Errorf("the cut-off holder's late write (token %d) was admitted after the new holder's (token %d)", holder.Token(), taken.Token())
	}
	t.Logf("holder cut off; its handle valid until %v after; another client got the lock %v after",
		validUntil.Sub(cutAt).Round(time.Millisecond), takenAt.Sub(cutAt).Round(time.Millisecond))
}

// TestLostPutReply: the reply of the transaction that put the owner's key
// is lost after etcd applied it. The retry with the same owner finds the
// key and reports the same grant, and nothing is left behind.
func TestLostPutReply(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	proxy := testserver.StartProxy(t, c.Members[0].Addr())
	b := etcdlock.New(dialFixedWindows(t, proxy.Addr()))
	t.Cleanup(func() { _ = b.Close() })
	admin := c.Client(t)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("lostreply")
	lost := loseReply(t, ctx, b, proxy, admin, key, 10*time.Second)
	var g driver.Grant
	var err error
	for {
		g, err = b.Acquire(ctx, lost.req) // the retry, once the client reconnected
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire repeated after the lost reply: %+v, %v; want granted", g, err)
	}
	if want := uint64(lost.kv.CreateRevision); g.Token != want {
		t.Errorf("repeated Acquire: token %d; want %d, the key's create revision", g.Token, want)
	}
	if err := b.Release(ctx, lost.req.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	resp, err := admin.Get(ctx, lockPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("keys left under the lock after Release: %v, %v; want none", resp, err)
	}
}

// TestLostPutReplyUnreleased: the reply of the transaction that put the
// owner's key is lost, and the release that follows fails too; the owner
// never asks again. The key still ends at its TTL, while the backend, and
// the lease it shares with its other keys, live on.
func TestLostPutReplyUnreleased(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	proxy := testserver.StartProxy(t, c.Members[0].Addr())
	b := etcdlock.New(dialFixedWindows(t, proxy.Addr()))
	t.Cleanup(func() { _ = b.Close() })
	admin := c.Client(t)
	ctx := timeout(t, 60*time.Second)
	key := uniqueKey("unreleased")
	const ttl = 3 * time.Second
	lost := loseReply(t, ctx, b, proxy, admin, key, ttl)
	// The release (distlock's best effort after an error) fails: the
	// connection is cut while it runs.
	proxy.Cut()
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b.Release(rctx, lost.req.Lease)
	cancel()
	proxy.Restore()
	if err == nil {
		t.Fatalf("Release through a cut connection: no error")
	}
	other := newBackend(t, c)
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("other")}, TTL: 10 * time.Second}
	for {
		g, err := other.Acquire(ctx, req)
		if err == nil && g.Acquired {
			break
		}
		if since := time.Since(lost.start); since > ttl+2*time.Second {
			t.Fatalf("another client still refused %v after the attempt whose reply was lost (TTL %v): %+v, %v", since.Round(time.Millisecond), ttl, g, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("another client got the lock %v after the lost attempt started (TTL %v)", time.Since(lost.start).Round(time.Millisecond), ttl)
	_ = other.Release(ctx, req.Lease)
	// The key ended by its deadline: its lease is alive, kept by b.
	if r, err := admin.TimeToLive(ctx, clientv3.LeaseID(lost.kv.Lease)); err != nil || r.TTL <= 0 {
		t.Errorf("the lease of the lost key ended (%+v, %v): the test shows nothing", r, err)
	}
}

// dialFixedWindows returns a client of addr with fixed flow-control
// windows: gRPC then sends no pings to size them, so the first bytes etcd
// sends after a request are its reply.
func dialFixedWindows(t *testing.T, addr string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(1 << 20)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func lockPrefix(key string) string {
	return etcdlock.DefaultPrefix + "lock/" + url.PathEscape(key) + "/"
}

// holdPrefix is the prefix of the holds of key's re-entrant lease.
func holdPrefix(key string) string {
	return etcdlock.DefaultPrefix + "hold/" + url.PathEscape(key) + "/"
}

// lostReply is an attempt whose reply was lost after etcd applied it.
type lostReply struct {
	req   driver.Request
	kv    *mvccpb.KeyValue // the owner's key it put
	start time.Time        // when the attempt began
}

// loseReply makes attempts on key, through proxy, of TTL ttl, until the
// reply of one is lost after etcd applied it, and returns that attempt
// once b's client has reconnected.
func loseReply(t *testing.T, ctx context.Context, b *etcdlock.Backend, proxy *testserver.Proxy, admin *clientv3.Client, key string, ttl time.Duration) lostReply {
	t.Helper()
	// Grant the backend its lease first, through another key: the
	// request to lose is the one that puts the owner's key.
	warm := driver.Request{Lease: driver.Lease{Key: key + "-warm", Owner: "warm"}, TTL: ttl}
	if g, err := b.Acquire(ctx, warm); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	// The proxy drops the first bytes etcd sends after the request; now
	// and then those come before etcd applied it (the reset then cancels
	// it). Try until a reply is lost after the put was applied.
	prefix := lockPrefix(key)
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatalf("in 20 tries, no reply was lost after its request was applied")
		}
		req := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("owner-lostreply")}, TTL: ttl}
		dropped := proxy.DropReply(req.Owner)
		start := time.Now()
		if g, err := b.Acquire(ctx, req); err == nil {
			t.Fatalf("Acquire with its reply dropped: %+v, no error", g)
		}
		select {
		case <-dropped:
		default:
			t.Fatalf("no reply was dropped")
		}
		time.Sleep(200 * time.Millisecond) // a request in flight lands
		resp, err := admin.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		applied := len(resp.Kvs) == 1 && len(ownerKeys(t, ctx, admin, key, req.Owner)) == 1
		if !applied {
			// Not applied, or applied late: start over on an empty lock.
			if _, err := admin.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		for { // reconnected?
			if _, err := b.Inspect(ctx, key); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if applied {
			return lostReply{req: req, kv: resp.Kvs[0], start: start}
		}
	}
}

// TestDeadCluster: every member of the cluster is gone. Each call fails
// within its bound, even with a context that never ends, and so does a
// TryLock: the etcd client alone would wait for a connection forever.
func TestDeadCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	const bound = time.Second
	b := newBackend(t, c, etcdlock.WithCallTimeout(bound))
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("dead")
	held := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("owner")}, TTL: 10 * time.Second}
	if g, err := b.Acquire(ctx, held); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	c.Members[0].Kill()

	other := held
	other.Key, other.Owner = key+"-other", uniqueKey("owner")
	bg := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error { _, err := b.Acquire(bg, other); return err }},
		{"Refresh", func() error { _, err := b.Refresh(bg, held.Lease, held.TTL); return err }},
		{"Release", func() error { return b.Release(bg, held.Lease) }},
		{"Inspect", func() error { _, err := b.Inspect(bg, key); return err }},
		{"List", func() error { _, err := b.List(bg, key); return err }},
		{"Break", func() error { _, err := b.Break(bg, key); return err }},
		{"Watch", func() error {
			w, err := b.Watch(bg, key, "")
			if err == nil {
				w.Close()
			}
			return err
		}},
		{"TryLock", func() error {
			m := distlock.New(b, distlock.WithTTL(2*time.Second), distlock.WithReleaseTimeout(bound)).Mutex(key + "-trylock")
			_, err := m.TryLock(bg)
			return err
		}},
	}
	for _, c := range calls {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s with the cluster dead: no error", c.name)
			}
			// TryLock makes an attempt, then a release: two calls.
			if took := time.Since(start); took > 2*bound+time.Second {
				t.Errorf("%s with the cluster dead took %v; want at most about %v", c.name, took.Round(time.Millisecond), bound)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s with the cluster dead, and a context that never ends: no answer in 10s", c.name)
		}
	}
}
