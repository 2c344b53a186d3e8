package etcdlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// namesPut returns the names of the keys put in key's line from revision
// from on, up to the current revision, as etcd's history has them
// (deleted keys too).
func namesPut(t *testing.T, ctx context.Context, cli *clientv3.Client, key string, from int64) []string {
	t.Helper()
	now, err := cli.Get(ctx, "-", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(map[string]bool)
	for resp := range cli.Watch(wctx, lockPrefix(key), clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("Watch: %v", err)
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.PUT {
				seen[string(ev.Kv.Key)] = true
			}
		}
		if resp.Header.Revision >= now.Header.Revision && (len(resp.Events) == 0 || resp.Events[len(resp.Events)-1].Kv.ModRevision >= now.Header.Revision) {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("the history of %q: %v", key, ctx.Err())
	}
	var names []string
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestKeyNamesReused: one client that takes and releases a lock many
// times, one holding after the other, puts its holdings under one name
// (of each kind), not a new one each time: etcd keeps every deleted key
// until the cluster is compacted, and reads of the lock's line would walk
// them all.
func TestKeyNamesReused(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	b := newBackend(t, c)
	ctx := timeout(t, 60*time.Second)
	const n = 20
	for _, tc := range []struct {
		name string
		req  driver.Request
	}{
		{"mutex", driver.Request{TTL: 10 * time.Second}},
		{"fair", driver.Request{TTL: 10 * time.Second, Queue: 10 * time.Second, Fair: true}},
		{"writer", driver.Request{Lease: driver.Lease{Kind: driver.Write}, TTL: 10 * time.Second, Queue: 10 * time.Second}},
		{"reader", driver.Request{Lease: driver.Lease{Kind: driver.Read}, TTL: 10 * time.Second}},
		{"permit", driver.Request{Lease: driver.Lease{Kind: driver.Permit}, TTL: 10 * time.Second, Limit: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := uniqueKey("names")
			start, err := admin.Get(ctx, "-", clientv3.WithCountOnly())
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			var last uint64
			for i := range n {
				req := tc.req
				req.Key, req.Owner = key, uniqueKey("owner")
				g, err := b.Acquire(ctx, req)
				if err != nil || !g.Acquired || g.Token <= last {
					t.Fatalf("Acquire %d: %+v, %v; want granted, with a token above %d", i, g, err, last)
				}
				last = g.Token
				if err := b.Release(ctx, req.Lease); err != nil {
					t.Fatalf("Release %d: %v", i, err)
				}
			}
			if names := namesPut(t, ctx, admin, key, start.Header.Revision+1); len(names) != 1 {
				t.Errorf("%d holdings one after the other put %d names in the line (%q, ...); want one", n, len(names), names[:min(2, len(names))])
			}
		})
	}
}

// lineKeys returns the keys in key's line, in name order.
func lineKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, key string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctx, lockPrefix(key), clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return resp.Kvs
}

// TestKeyNamesDistinct: holdings and waiters of one key at once in one
// process have keys of their own, and a name reused after its holding
// ended is never taken for that holding: its owner's repeated Release
// succeeds without touching the new holder, its Refresh is refused, and
// a key found under the name with another owner's value (an attempt's,
// whose reply was lost) is not taken for the new owner's.
func TestKeyNamesDistinct(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	ctx := timeout(t, 60*time.Second)

	t.Run("permits", func(t *testing.T) {
		b, other := newBackend(t, c), newBackend(t, c)
		key := uniqueKey("distinct-permits")
		permit := func(name string) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(name), Kind: driver.Permit}, TTL: 10 * time.Second, Limit: 2}
		}
		p1, p2, p3 := permit("p1"), permit("p2"), permit("p3")
		for _, p := range []driver.Request{p1, p2} {
			if g, err := b.Acquire(ctx, p); err != nil || !g.Acquired {
				t.Fatalf("Acquire of a permit of 2: %+v, %v; want granted", g, err)
			}
		}
		if kvs := lineKeys(t, ctx, admin, key); len(kvs) != 2 {
			t.Fatalf("two permits held through one backend: %d keys in the line; want two", len(kvs))
		}
		if err := b.Release(ctx, p1.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if g, err := b.Acquire(ctx, p3); err != nil || !g.Acquired {
			t.Fatalf("Acquire of a permit after one was released: %+v, %v; want granted", g, err)
		}
		// p1's name is p3's now: p1's repeat must not take p3's key.
		if err := b.Release(ctx, p1.Lease); err != nil {
			t.Errorf("repeated Release of a released permit: %v; want success", err)
		}
		if _, err := b.Refresh(ctx, p1.Lease, 10*time.Second); err == nil {
			t.Errorf("Refresh of a released permit whose name is reused: no error; want ErrNotHeld")
		}
		if kvs := lineKeys(t, ctx, admin, key); len(kvs) != 2 {
			t.Fatalf("after a repeated Release of a released permit: %d keys in the line; want the two held", len(kvs))
		}
		for _, p := range []driver.Request{p2, p3} {
			if _, err := b.Refresh(ctx, p.Lease, 10*time.Second); err != nil {
				t.Errorf("Refresh of a held permit: %v", err)
			}
		}
		// Another backend releases p2 by its owner.
		if err := other.Release(ctx, p2.Lease); err != nil {
			t.Errorf("Release of a permit through another backend: %v", err)
		}
		if err := other.Release(ctx, permit("stranger").Lease); err == nil {
			t.Errorf("Release of a permit never held, through another backend: no error; want ErrNotHeld")
		}
		if kvs := ownerKeys(t, ctx, admin, key, p3.Owner); len(kvs) != 1 || len(lineKeys(t, ctx, admin, key)) != 1 {
			t.Errorf("after another backend released one permit: %d keys of the other holder's; want it alone in the line", len(kvs))
		}
		if err := b.Release(ctx, p3.Lease); err != nil {
			t.Errorf("Release: %v", err)
		}
	})

	t.Run("waiters", func(t *testing.T) {
		holder, b := newBackend(t, c), newBackend(t, c)
		key := uniqueKey("distinct-waiters")
		fair := func(name string) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(name)}, TTL: 10 * time.Second, Queue: 10 * time.Second, Fair: true}
		}
		h, w1, w2 := fair("holder"), fair("w1"), fair("w2")
		if g, err := holder.Acquire(ctx, h); err != nil || !g.Acquired {
			t.Fatalf("holder's Acquire: %+v, %v", g, err)
		}
		for _, w := range []driver.Request{w1, w2} {
			if g, err := b.Acquire(ctx, w); err != nil || g.Acquired {
				t.Fatalf("waiter's Acquire while held: %+v, %v; want refused", g, err)
			}
		}
		if kvs := lineKeys(t, ctx, admin, key); len(kvs) != 3 {
			t.Fatalf("a holder and two waiters through one backend: %d keys in the line; want three", len(kvs))
		}
		if err := holder.Release(ctx, h.Lease); err != nil {
			t.Fatalf("holder's Release: %v", err)
		}
		g1, err := b.Acquire(ctx, w1)
		if err != nil || !g1.Acquired {
			t.Fatalf("first waiter's Acquire after the release: %+v, %v; want granted", g1, err)
		}
		if g, err := b.Acquire(ctx, w2); err != nil || g.Acquired {
			t.Fatalf("second waiter's Acquire while the first holds: %+v, %v; want refused", g, err)
		}
		if err := b.Release(ctx, w1.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		g2, err := b.Acquire(ctx, w2)
		if err != nil || !g2.Acquired || g2.Token <= g1.Token {
			t.Fatalf("second waiter's Acquire after the first released: %+v, %v; want granted, with a token above %d", g2, err, g1.Token)
		}
		// A new owner through b takes the first waiter's name: the first
		// waiter's repeated Release must leave its key.
		w3 := fair("w3")
		if g, err := b.Acquire(ctx, w3); err != nil || g.Acquired {
			t.Fatalf("third waiter's Acquire while held: %+v, %v; want refused", g, err)
		}
		if err := b.Release(ctx, w1.Lease); err != nil {
			t.Errorf("repeated Release of a released holding: %v; want success", err)
		}
		if kvs := ownerKeys(t, ctx, admin, key, w3.Owner); len(kvs) != 1 {
			t.Errorf("after a repeated Release of a holding whose name is reused: %d keys of the waiter that has it now; want one", len(kvs))
		}
		for _, w := range []driver.Request{w2, w3} {
			if err := b.Release(ctx, w.Lease); err != nil {
				t.Errorf("Release: %v", err)
			}
		}
	})

	t.Run("stale", func(t *testing.T) {
		b := newBackend(t, c)
		key := uniqueKey("distinct-stale")
		req := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("first")}, TTL: 10 * time.Second}
		start, err := admin.Get(ctx, "-", clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if g, err := b.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if err := b.Release(ctx, req.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		names := namesPut(t, ctx, admin, key, start.Header.Revision+1)
		if len(names) != 1 {
			t.Fatalf("names put: %q; want one", names)
		}
		// A key under the name that is not the next owner's: what a put
		// whose reply was lost leaves, applied after its owner was done.
		stale, err := admin.Put(ctx, names[0], `{"owner":"gone","kind":0,"since":0}`)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		next := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("next")}, TTL: 10 * time.Second}
		g, err := b.Acquire(ctx, next)
		if err != nil || !g.Acquired || g.Token <= uint64(stale.Header.Revision) {
			t.Fatalf("Acquire with a stale key under the backend's name: %+v, %v; want granted, with a token above the stale key's %d", g, err, stale.Header.Revision)
		}
		kvs := lineKeys(t, ctx, admin, key)
		if mine := ownerKeys(t, ctx, admin, key, next.Owner); len(kvs) != 1 || len(mine) != 1 || uint64(mine[0].CreateRevision) != g.Token {
			t.Errorf("after the grant: %d keys in the line, %d of the owner's; want the owner's alone, created at the token %d", len(kvs), len(mine), g.Token)
		}
		if err := b.Release(ctx, next.Lease); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
}
