package redisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestNamedGrantMarksWaited: the grant to a client that a release named
// is marked as waited for without looking for others enlisted (in a
// handoff the releaser has enlisted itself by then): it runs one script of
// four commands (the MGET of the lock's records, the clock, the lease and
// the script), and its release wakes the waiters, though nobody is
// enlisted: the lease is marked as waited for by enlisted clients.
func TestNamedGrantMarksWaited(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	k := redisnode.KeysFor("named:", t.Name())
	if tok, _, err := redisnode.AcquireAs(ctx, rdb, k, "holder", time.Minute, "", "h"); err != nil || tok == 0 {
		t.Fatalf("holder: token %d, %v", tok, err)
	}
	if tok, _, err := redisnode.AcquireAs(ctx, rdb, k, "waiter", time.Minute, "", "w"); err != nil || tok != 0 {
		t.Fatalf("waiter: token %d, %v; want refused", tok, err)
	}
	if ok, _, err := redisnode.ReleaseAs(ctx, rdb, k, "holder", "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	before := srv.Commands(t)
	if tok, _, err := redisnode.AcquireAs(ctx, rdb, k, "waiter", time.Minute, "", "+w"); err != nil || tok == 0 {
		t.Fatalf("named waiter: token %d, %v", tok, err)
	}
	if n := srv.Commands(t) - before; n != 4 {
		t.Errorf("the grant to the named waiter ran %d commands, want 4", n)
	}
	v, err := rdb.Get(ctx, k.Lock).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(v, "\n~>") {
		t.Errorf("the named waiter's lease %q is not marked as waited for", v)
	}
}
