package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestConfirmKeyGone: a repeated attempt finds the owner's key first in
// line, and the key ends (its lease expires, or a Break) before the grant
// is issued. The attempt must not report a grant with no key behind it,
// whose Lost would never close: it puts a new key, and reports that key's
// grant, while the first grant's Lost closes.
func TestConfirmKeyGone(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	var target atomic.Pointer[string] // the key to delete, once
	restore := etcdlock.SetBeforeIssue(func(key string) {
		if p := target.Load(); p != nil && *p == key && target.CompareAndSwap(p, nil) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := admin.Delete(ctx, key); err != nil {
				t.Errorf("Delete %q: %v", key, err)
			}
		}
	})
	t.Cleanup(restore)
	for _, tc := range []struct {
		name  string
		again time.Duration // the repeat's TTL
	}{
		{"same lease", 2 * time.Second},
		{"other lease", 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, c)
			ctx := timeout(t, 30*time.Second)
			key := uniqueKey("confirm-gone")
			req := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("owner")}, TTL: 2 * time.Second}
			g1, err := b.Acquire(ctx, req)
			if err != nil || !g1.Acquired {
				t.Fatalf("Acquire: %+v, %v", g1, err)
			}
			own := ownKey(t, ctx, admin, key)
			target.Store(&own)
			req.TTL = tc.again
			g2, err := b.Acquire(ctx, req)
			if target.Load() != nil {
				target.Store(nil)
				t.Fatalf("the repeated Acquire (%+v, %v) did not confirm the owner's key: the test shows nothing", g2, err)
			}
			if err != nil || !g2.Acquired {
				t.Fatalf("repeated Acquire, its key deleted before the grant: %+v, %v; want a grant of a new key", g2, err)
			}
			resp, err := admin.Get(ctx, own)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if len(resp.Kvs) == 0 {
				t.Fatalf("repeated Acquire, its key deleted before the grant: granted (token %d, Lost %s) with no key behind it", g2.Token, state(g2.Lost))
			}
			if rev := uint64(resp.Kvs[0].CreateRevision); g2.Token != rev {
				t.Errorf("repeated Acquire: token %d; want %d, the create revision of the owner's key", g2.Token, rev)
			}
			if g2.Token <= g1.Token {
				t.Errorf("repeated Acquire of a new key: token %d, not above the first grant's %d", g2.Token, g1.Token)
			}
			if state(g2.Lost) != "open" {
				t.Errorf("the new grant's Lost is %s; want open", state(g2.Lost))
			}
			if state(g1.Lost) != "closed" {
				t.Errorf("the first grant's Lost is %s, though its key is gone; want closed", state(g1.Lost))
			}
			if err := b.Release(ctx, req.Lease); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
}

// ownKey returns the name of the one key in key's line.
func ownKey(t *testing.T, ctx context.Context, admin *clientv3.Client, key string) string {
	t.Helper()
	resp, err := admin.Get(ctx, lockPrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the keys in the line of %q: %v, %v; want one", key, resp, err)
	}
	return string(resp.Kvs[0].Key)
}

func state(c <-chan struct{}) string {
	if c == nil {
		return "nil"
	}
	select {
	case <-c:
		return "closed"
	default:
		return "open"
	}
}

// TestPermitRepeat: a permit holder that repeats its attempt after other
// permits were granted (one granted alone, one granted beside a holder)
// reports the same grant, and a permit granted after others were
// released has a greater token than theirs.
func TestPermitRepeat(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := newBackend(t, c)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("permit-repeat")
	permit := func(name string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey(name), Kind: driver.Permit}, TTL: 10 * time.Second, Limit: 2}
	}
	grant := func(req driver.Request) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire of a permit of 2: %+v, %v; want granted", g, err)
		}
		return g
	}
	release := func(req driver.Request) {
		t.Helper()
		if err := b.Release(ctx, req.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	p1, p2, late := permit("p1"), permit("p2"), permit("late")
	g1, g2 := grant(p1), grant(p2)
	if g, err := b.Acquire(ctx, late); err != nil || g.Acquired {
		t.Fatalf("Acquire of a third permit of 2: %+v, %v; want refused", g, err)
	}
	release(p1)
	release(p2)
	gl := grant(late)
	if gl.Token <= max(g1.Token, g2.Token) {
		t.Errorf("permit granted with token %d, not above the tokens %d and %d of the permits released before", gl.Token, g1.Token, g2.Token)
	}
	p3 := permit("p3")
	g3 := grant(p3)
	if again := grant(late); again.Token != gl.Token {
		t.Errorf("repeated Acquire of a permit granted alone, after another was granted: token %d; want the same grant, %d", again.Token, gl.Token)
	}
	release(late)
	grant(permit("p4"))
	if again := grant(p3); again.Token != g3.Token {
		t.Errorf("repeated Acquire of a permit granted beside another, after another was granted: token %d; want the same grant, %d", again.Token, g3.Token)
	}
}
