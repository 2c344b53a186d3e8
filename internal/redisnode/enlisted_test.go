package redisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestEnlistedReleaseSkipsFairLine: the release of a lease that only
// plain attempts waited for wakes the client enlisted first without
// looking at the fair line, and tells the releasing client to yield: one
// script of five commands (the lock's GET, the waiters' ZPOPMIN, the free
// record, the wake-up and the script).
func TestEnlistedReleaseSkipsFairLine(t *testing.T) {
	srv, rdb, k := heldWithEnlisted(t)
	ctx := context.Background()
	before := srv.Commands(t)
	ok, yield, err := redisnode.ReleaseAs(ctx, rdb, k, "holder", "h")
	if err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if n := srv.Commands(t) - before; n != 5 {
		t.Errorf("the release ran %d commands, want 5", n)
	}
	if n, err := rdb.ZCard(ctx, k.Waiters).Result(); err != nil || n != 0 {
		t.Errorf("enlisted clients after the release: %d, %v; want the waiter taken out", n, err)
	}
	if yield == 0 {
		t.Error("the release woke another client but does not tell the releaser to yield")
	}
}

// TestFairWaiterBehindEnlistedLease: a fair waiter refused by a lease
// that plain attempts waited for gets the lock handed over by its
// release, before the client enlisted first.
func TestFairWaiterBehindEnlistedLease(t *testing.T) {
	srv, rdb, k := heldWithEnlisted(t)
	ctx := context.Background()
	if tok, _, err := redisnode.AcquireFair(ctx, rdb, k, "fair", time.Minute, "", time.Minute, redisnode.Stamp(), ""); err != nil || tok != 0 {
		t.Fatalf("fair waiter: token %d, %v; want refused", tok, err)
	}
	releaseHandsTo(t, srv, rdb, k, "fair")
}

// TestFairRefusalSkipsHead: a fair waiter's attempt refused by a held
// lock renews its place without looking at the head of the line, which
// decides nothing while the lock is held: its second attempt runs one
// script of eight commands (the lock's records, the clock, its place in
// the queue, the place itself and the expiry of both, the holder's
// remaining TTL, and the script).
func TestFairRefusalSkipsHead(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	k := redisnode.KeysFor("fair:", t.Name())
	if err := redisnode.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := redisnode.AcquireFair(ctx, rdb, k, "holder", time.Minute, "", time.Minute, redisnode.Stamp(), ""); err != nil || tok == 0 {
		t.Fatalf("holder: token %d, %v", tok, err)
	}
	for i := range 2 {
		before := srv.Commands(t)
		if tok, _, err := redisnode.AcquireFair(ctx, rdb, k, "waiter", time.Minute, "", time.Minute, redisnode.Stamp(), ""); err != nil || tok != 0 {
			t.Fatalf("waiter: token %d, %v; want refused", tok, err)
		}
		if n := srv.Commands(t) - before; i == 1 && n != 8 {
			t.Errorf("the waiter's second attempt ran %d commands, want 8", n)
		}
	}
	releaseHandsTo(t, srv, rdb, k, "waiter")
}

// releaseHandsTo releases k's lease of "holder" (client "h") and checks
// that the release handed the lock over to the fair waiter owner, in one
// script of ten commands: the lock's and the counter's MGET, the head of
// the line, the clock, the head's place, its leaving the line (ZREM, HDEL,
// and ZCARD for others), the new lease, the message and the script.
func releaseHandsTo(t *testing.T, srv *testserver.Redis, rdb *redis.Client, k redisnode.Keys, owner string) {
	t.Helper()
	ctx := context.Background()
	before := srv.Commands(t)
	if ok, _, err := redisnode.ReleaseAs(ctx, rdb, k, "holder", "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if n := srv.Commands(t) - before; n != 10 {
		t.Errorf("the hand-over ran %d commands, want 10", n)
	}
	v, err := rdb.Get(ctx, k.Lock).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, owner+"\n") {
		t.Errorf("after the release the lock holds %q; want it handed over to %s", v, owner)
	}
}

// heldWithEnlisted starts a server where the lock of k is held by the
// owner "holder" of client "h", and the plain attempt of the owner
// "waiter" of client "w" was refused and enlisted it.
func heldWithEnlisted(t *testing.T) (*testserver.Redis, *redis.Client, redisnode.Keys) {
	t.Helper()
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	k := redisnode.KeysFor("enlisted:", t.Name())
	if err := redisnode.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := redisnode.AcquireAs(ctx, rdb, k, "holder", time.Minute, "", "h"); err != nil || tok == 0 {
		t.Fatalf("holder: token %d, %v", tok, err)
	}
	if tok, _, err := redisnode.AcquireAs(ctx, rdb, k, "waiter", time.Minute, "", "w"); err != nil || tok != 0 {
		t.Fatalf("waiter: token %d, %v; want refused", tok, err)
	}
	return srv, rdb, k
}
