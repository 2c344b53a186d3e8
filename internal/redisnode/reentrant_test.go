package redisnode_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestReentrantGuardAndTokens: a re-entrant lease's first hold gets its
// token as a plain lock does — held back by the restart guard on a server
// not known to be fresh, and floored at the server clock, so that a lost
// counter resumes above the tokens issued before — and its nested holds
// get the lease's token.
func TestReentrantGuardAndTokens(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()

	// The guard: this prefix has no marker and the server is young.
	guarded := redisnode.NewKeyCache("guarded:", redisnode.Guard{MaxTTL: time.Hour}).Get("k")
	tok, _, err := redisnode.AcquireReentrant(ctx, rdb, guarded, "o1", time.Minute, "", "id")
	var ge *redisnode.GuardError
	if !errors.As(err, &ge) || tok != 0 || ge.Wait < 30*time.Minute {
		t.Fatalf("re-entrant acquire on a young server without a marker: token %d, %v; want the guard's refusal for most of an hour", tok, err)
	}
	if err := redisnode.DeclareFresh(ctx, rdb, "guarded:", false); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := redisnode.AcquireReentrant(ctx, rdb, guarded, "o1", time.Minute, "", "id"); err != nil || tok == 0 {
		t.Fatalf("re-entrant acquire after DeclareFresh: token %d, %v; want granted", tok, err)
	}

	// The clock floor, and the same token for every hold.
	k := redisnode.KeysFor("reentrant:", "k")
	before := uint64(time.Now().Add(-time.Minute).UnixMicro())
	first, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o1", time.Minute, "", "id")
	if err != nil || first < before {
		t.Fatalf("first hold: token %d, %v; want one above the server clock's µs (%d a minute ago)", first, err, before)
	}
	nested, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o2", time.Minute, "", "id")
	if err != nil || nested != first {
		t.Fatalf("nested hold: token %d, %v; want the lease's %d", nested, err, first)
	}
	for _, o := range []string{"o1", "o2"} {
		if ok, err := redisnode.Release(ctx, rdb, k, o); !ok || err != nil {
			t.Fatalf("Release %s: %v, %v", o, ok, err)
		}
	}
	if err := rdb.Del(ctx, k.Fence).Err(); err != nil { // the counter is lost
		t.Fatal(err)
	}
	next, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o3", time.Minute, "", "id")
	if err != nil || next <= first {
		t.Fatalf("after the counter was lost: token %d, %v; want above %d", next, err, first)
	}
}

// TestSeedRaisesReentrantToken: redlock's fencing round raises the token
// stored in a re-entrant lease, so that its later holds report the token
// its first hold was given; a seed for another identity leaves it alone.
func TestSeedRaisesReentrantToken(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	k := redisnode.KeysFor("seed:", "k")
	tok, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o1", time.Minute, "", "id")
	if err != nil || tok == 0 {
		t.Fatalf("acquire: %d, %v", tok, err)
	}
	if _, err := redisnode.Seed(ctx, rdb, k, tok+500, "other"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o2", time.Minute, "", "id"); err != nil || got != tok {
		t.Fatalf("nested hold after a seed for another identity: token %d, %v; want %d", got, err, tok)
	}
	if _, err := redisnode.Seed(ctx, rdb, k, tok+1000, "id"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := redisnode.AcquireReentrant(ctx, rdb, k, "o3", time.Minute, "", "id"); err != nil || got != tok+1000 {
		t.Fatalf("nested hold after the seed: token %d, %v; want the seeded %d", got, err, tok+1000)
	}
	if st, err := redisnode.Inspect(ctx, rdb, k); err != nil || st.Holds != 3 || st.Token != tok+1000 {
		t.Fatalf("Inspect: %+v, %v; want 3 holds with token %d", st, err, tok+1000)
	}
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl < 50*time.Second {
		t.Fatalf("the seed cut the lease to %v", pttl)
	}
}
