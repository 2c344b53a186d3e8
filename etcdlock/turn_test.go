package etcdlock_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// countingClient returns a client of the cluster that counts the unary
// requests it sends (a watch is a stream, not counted), closed at cleanup.
func countingClient(tb testing.TB, c *etcdtest.Cluster, n *atomic.Int64) *clientv3.Client {
	tb.Helper()
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		n.Add(1)
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// inLine puts a fair waiter of key in line behind its holder, and opens
// its watch. The waiter's attempts are refused.
func inLine(t *testing.T, b *etcdlock.Backend, key string) (driver.Request, driver.Watch) {
	t.Helper()
	ctx := timeout(t, 30*time.Second)
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("waiter")}, TTL: 10 * time.Second, Queue: 10 * time.Second, Fair: true}
	if g, err := b.Acquire(ctx, req); err != nil || g.Acquired {
		t.Fatalf("waiter's Acquire while the lock is held: %+v, %v; want refused", g, err)
	}
	w, err := b.Watch(ctx, key, req.Owner)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if g, err := b.Acquire(ctx, req); err != nil || g.Acquired {
		t.Fatalf("waiter's Acquire after Watch, the lock still held: %+v, %v; want refused", g, err)
	}
	return req, w
}

// TestTurnFromWatch: the fair waiter next in line learns from its watch
// that the release made its key the first in line, and its next attempt
// is granted without a request to etcd: the handoff costs the release's
// round trip and the watch event, not more round trips after it. The
// grant is the waiter's key's, behind the holder's.
func TestTurnFromWatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	var sent atomic.Int64
	holder := newBackend(t, c)
	waiter := etcdlock.New(countingClient(t, c, &sent))
	t.Cleanup(func() { _ = waiter.Close() })
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("turn")
	first := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("holder")}, TTL: 10 * time.Second, Queue: 10 * time.Second, Fair: true}
	g1, err := holder.Acquire(ctx, first)
	if err != nil || !g1.Acquired {
		t.Fatalf("holder's Acquire: %+v, %v", g1, err)
	}
	req, w := inLine(t, waiter, key)
	if err := holder.Release(ctx, first.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatal("the waiter's watch did not fire after the release")
	}
	before := sent.Load()
	g2, err := waiter.Acquire(ctx, req)
	if err != nil || !g2.Acquired {
		t.Fatalf("waiter's Acquire after its watch fired on the release: %+v, %v; want granted", g2, err)
	}
	if n := sent.Load() - before; n != 0 {
		t.Errorf("the waiter's grant after the release took %d more requests to etcd; want 0: its watch told it its turn", n)
	}
	if g2.Token <= g1.Token || g2.ValidFor <= 0 || state(g2.Lost) != "open" {
		t.Errorf("waiter's grant: token %d (holder's %d), valid for %v, Lost %s; want a greater token, a positive validity, Lost open", g2.Token, g1.Token, g2.ValidFor, state(g2.Lost))
	}
	if kvs := ownerKeys(t, ctx, c.Client(t), key, req.Owner); len(kvs) == 0 || uint64(kvs[0].CreateRevision) != g2.Token {
		t.Fatalf("the waiter's key after its grant: %v; want its key, created at the token %d", kvs, g2.Token)
	}
	if err := waiter.Release(ctx, req.Lease); err != nil {
		t.Errorf("waiter's Release: %v", err)
	}
}

// TestTurnKeyGone: the holder's key and the waiter's place are deleted
// together behind their backs. The waiter's watch sees the key ahead go,
// but its own key with it: its next attempt must not be granted on a key
// that no longer exists.
func TestTurnKeyGone(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	admin := c.Client(t)
	holder, waiter := newBackend(t, c), newBackend(t, c)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("turn-gone")
	first := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("holder")}, TTL: 10 * time.Second, Queue: 10 * time.Second, Fair: true}
	if g, err := holder.Acquire(ctx, first); err != nil || !g.Acquired {
		t.Fatalf("holder's Acquire: %+v, %v", g, err)
	}
	req, w := inLine(t, waiter, key)
	expire(t, admin, key)
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatal("the waiter's watch did not fire after the line was deleted")
	}
	g, err := waiter.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("waiter's Acquire after the line was deleted: %v", err)
	}
	if !g.Acquired {
		return // refused: no grant without a key
	}
	if kvs := ownerKeys(t, ctx, admin, key, req.Owner); len(kvs) == 0 || uint64(kvs[0].CreateRevision) != g.Token {
		t.Fatalf("waiter granted (token %d) after its place was deleted, with no key of that revision behind it: %v", g.Token, kvs)
	}
}

// ownerKeys returns the keys in key's line whose value names owner
// (path-escaped).
func ownerKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, key, owner string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctx, lockPrefix(key), clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	var kvs []*mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		var v struct{ Owner string }
		if json.Unmarshal(kv.Value, &v) == nil && v.Owner == url.PathEscape(owner) { // as the value names it
			kvs = append(kvs, kv)
		}
	}
	return kvs
}
