package redisnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestReceiptOutlivesItsFreeRecord: a release's receipt lives in the free
// record it leaves in the lock key, and then in the lease that replaces
// that record: a grant in its place, or a fair waiter's lease handed over
// by the release itself. A repeat of the release, sent after its reply was
// lost, reports the release it made while that lease holds the lock; once
// that lease is released in its turn, the repeat reports the lock lost.
func TestReceiptOutlivesItsFreeRecord(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	const ttl, place = 10 * time.Second, 10 * time.Second
	acquire := func(k redisnode.Keys, owner, stamp string) uint64 {
		t.Helper()
		tok, _, err := redisnode.AcquireFair(ctx, rdb, k, owner, ttl, "", place, stamp, "")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	release := func(k redisnode.Keys, owner string, want bool, what string) {
		t.Helper()
		if ok, err := redisnode.Release(ctx, rdb, k, owner); err != nil || ok != want {
			t.Fatalf("%s: released %v, %v; want %v", what, ok, err, want)
		}
	}
	for _, handOver := range []bool{false, true} {
		k := redisnode.KeysFor("receipt:", t.Name()+map[bool]string{false: "-grant", true: "-handover"}[handOver])
		if acquire(k, "a", "") == 0 {
			t.Fatal("a: not granted")
		}
		stamp := ""
		if handOver {
			stamp = "1" // b takes a grant the release hands over
		}
		if acquire(k, "b", stamp) != 0 {
			t.Fatal("b: granted while a holds the lock")
		}
		release(k, "a", true, "a's release")
		if !handOver && acquire(k, "b", "") == 0 {
			t.Fatal("b: not granted after a's release")
		}
		if st, err := redisnode.Inspect(ctx, rdb, k); err != nil || st.Owner != "b" {
			t.Fatalf("hand-over %v: the lock is %+v, %v; want b's", handOver, st, err)
		}
		release(k, "a", true, "a's release repeated while b holds the lock")
		release(k, "b", true, "b's release")
		release(k, "a", false, "a's release repeated after b's")
		release(k, "b", true, "b's release repeated")
	}
}
