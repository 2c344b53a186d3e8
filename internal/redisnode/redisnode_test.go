package redisnode_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestHintAtLeaseEnd: an attempt refused by a lease in its last millisecond
// (PTTL 0) still reports a positive retry hint. A hint of 0 means "unknown",
// which sends a waiter to its safety poll (a second by default) although the
// lease ends at once. The competitor tries back to back until it gets the
// key, so some attempts land in the holder's last millisecond.
func TestHintAtLeaseEnd(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	const ttl = 20 * time.Millisecond
	type attempt func(k redisnode.Keys, owner string) (uint64, time.Duration, error)
	kinds := []struct {
		name       string
		hold, take attempt
	}{
		{"lock", lockAttempt(ctx, rdb, ttl), lockAttempt(ctx, rdb, ttl)},
		{"fair", fairAttempt(ctx, rdb, ttl), fairAttempt(ctx, rdb, ttl)},
		{"re-entrant after another identity", reentrantAttempt(ctx, rdb, ttl, "a"), reentrantAttempt(ctx, rdb, ttl, "b")},
		{"permit", permitAttempt(ctx, rdb, ttl), permitAttempt(ctx, rdb, ttl)},
		{"writer after writer", writeAttempt(ctx, rdb, ttl), writeAttempt(ctx, rdb, ttl)},
		{"reader after writer", writeAttempt(ctx, rdb, ttl), readAttempt(ctx, rdb, ttl)},
		{"writer after reader", readAttempt(ctx, rdb, ttl), writeAttempt(ctx, rdb, ttl)},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			var refusals, last int
			for round := range 5 {
				k := redisnode.KeysFor("hint:", fmt.Sprintf("%s-%d", t.Name(), round))
				if tok, _, err := kind.hold(k, "holder"); err != nil || tok == 0 {
					t.Fatalf("holder: token %d, %v", tok, err)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					tok, hint, err := kind.take(k, "taker")
					if err != nil {
						t.Fatal(err)
					}
					if tok > 0 {
						break
					}
					refusals++
					if hint <= 0 {
						t.Fatalf("round %d: refused with hint %v while the holder's lease ends; want > 0", round, hint)
					}
					if hint == time.Millisecond {
						last++
					}
					if time.Now().After(deadline) {
						t.Fatalf("round %d: not granted 5s after a %v lease", round, ttl)
					}
				}
			}
			t.Logf("%d refusals, %d with a 1ms hint", refusals, last)
		})
	}
}

func lockAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.Acquire(ctx, rdb, k, owner, ttl, "")
	}
}

func reentrantAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration, reentry string) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.AcquireReentrant(ctx, rdb, k, owner, ttl, "", reentry)
	}
}

func fairAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.AcquireFair(ctx, rdb, k, owner, ttl, "", 0, "", "")
	}
}

func permitAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.AcquirePermit(ctx, rdb, k, owner, ttl, 1)
	}
}

func writeAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.AcquireWrite(ctx, rdb, k, owner, ttl, "", 0)
	}
}

func readAttempt(ctx context.Context, rdb *redis.Client, ttl time.Duration) func(redisnode.Keys, string) (uint64, time.Duration, error) {
	return func(k redisnode.Keys, owner string) (uint64, time.Duration, error) {
		return redisnode.AcquireRead(ctx, rdb, k, owner, ttl)
	}
}

// TestManyLapsedLeases: the script that finds 10000 permits (or readers)
// lapsed since the last call drops them all, in one call. Lua's unpack
// takes at most about 8000 values.
func TestManyLapsedLeases(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	const n = 10000
	kinds := []struct {
		name           string
		leases, tokens func(redisnode.Keys) string
		take           func(k redisnode.Keys) (uint64, time.Duration, error)
	}{
		{"permits", func(k redisnode.Keys) string { return k.Permits }, func(k redisnode.Keys) string { return k.Tokens },
			func(k redisnode.Keys) (uint64, time.Duration, error) {
				return redisnode.AcquirePermit(ctx, rdb, k, "new", time.Minute, 3)
			}},
		{"readers", func(k redisnode.Keys) string { return k.Readers }, func(k redisnode.Keys) string { return k.RTokens },
			func(k redisnode.Keys) (uint64, time.Duration, error) {
				return redisnode.AcquireRead(ctx, rdb, k, "new", time.Minute)
			}},
		{"readers, by a writer", func(k redisnode.Keys) string { return k.Readers }, func(k redisnode.Keys) string { return k.RTokens },
			func(k redisnode.Keys) (uint64, time.Duration, error) {
				return redisnode.AcquireWrite(ctx, rdb, k, "new", time.Minute, "", 0)
			}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			k := redisnode.KeysFor("lapsed:", t.Name())
			// n leases that lapsed long ago (expiry 1 ms after the epoch),
			// laid out as the scripts leave them.
			zargs := make([]redis.Z, 0, n)
			hargs := make([]any, 0, 2*n)
			for i := range n {
				owner := "owner-" + strconv.Itoa(i)
				zargs = append(zargs, redis.Z{Score: 1, Member: owner})
				hargs = append(hargs, owner, i+1)
			}
			if err := rdb.ZAdd(ctx, kind.leases(k), zargs...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.HSet(ctx, kind.tokens(k), hargs...).Err(); err != nil {
				t.Fatal(err)
			}
			tok, _, err := kind.take(k)
			if err != nil || tok == 0 {
				t.Fatalf("attempt after %d leases lapsed: token %d, %v; want granted", n, tok, err)
			}
			if got := rdb.HKeys(ctx, kind.tokens(k)).Val(); len(got) > 2 || slices.ContainsFunc(got, func(f string) bool { return strings.HasPrefix(f, "owner-") }) {
				t.Errorf("tokens left after the clean-up: %q; want at most the new holder's (and a semaphore's size)", got)
			}
			if got := rdb.ZCard(ctx, kind.leases(k)).Val(); got > 1 {
				t.Errorf("%d leases left after the clean-up; want at most the new holder's", got)
			}
		})
	}
}

// TestReleaseWakesWhoWaited: a release publishes only when an attempt was
// refused by the lease it ends; then even a Redlock minority given back
// quietly (WakeNone) says so, since the refused waiter waits for it.
func TestReleaseWakesWhoWaited(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, wake := range []redisnode.Wake{redisnode.WakeNext, redisnode.WakeToken, redisnode.WakeNone} {
		for _, refused := range []bool{false, true} {
			k := redisnode.KeysFor("wake:", fmt.Sprintf("%d-%v", wake, refused))
			ps := rdb.Subscribe(ctx, k.Channel)
			if _, err := ps.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}
			if tok, _, err := redisnode.Acquire(ctx, rdb, k, "holder", 10*time.Second, ""); err != nil || tok == 0 {
				t.Fatalf("holder: token %d, %v", tok, err)
			}
			if refused {
				if tok, _, err := redisnode.Acquire(ctx, rdb, k, "waiter", 10*time.Second, ""); err != nil || tok != 0 {
					t.Fatalf("waiter: token %d, %v; want refused", tok, err)
				}
			}
			if ok, err := redisnode.ReleaseWaking(ctx, rdb, k, "holder", wake); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			// A PING on the same connection comes back after any message
			// the release published.
			if err := ps.Ping(ctx, "after"); err != nil {
				t.Fatal(err)
			}
			published := false
			for {
				msg, err := ps.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := msg.(*redis.Pong); ok {
					break
				}
				if _, ok := msg.(*redis.Message); ok {
					published = true
				}
			}
			if published != refused {
				t.Errorf("wake %d, an attempt refused %v: published %v; want %v", wake, refused, published, refused)
			}
			ps.Close()
		}
	}
}
