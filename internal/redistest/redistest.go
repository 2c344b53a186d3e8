// Package redistest holds the test plumbing shared by the tests of the
// Redis backends (redislock and redlock) and of the packages that run them:
// client setup, the check that goroutines settle back after a test, the
// keys of a lock, expiring a lock behind its holders' backs, and the bad
// URLs every Redis scheme refuses.
package redistest

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Client returns a go-redis client for addr, set up as the backends
// recommend (context deadlines honoured, no retries, one dial attempt: a
// dead node fails at once, with its own error), changed by each edit, and
// closed at cleanup.
func Client(tb testing.TB, addr string, edits ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	opt := &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}
	for _, edit := range edits {
		edit(opt)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// GoroutinesSettle fails tb unless the number of goroutines comes back to
// at most before+2 (a little slack for the runtime's own) within wait,
// and then shows every goroutine's stack. before is runtime.NumGoroutine
// taken when the test began.
func GoroutinesSettle(tb testing.TB, before int, wait time.Duration) {
	tb.Helper()
	var after int
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if after = runtime.NumGoroutine(); after <= before+2 || time.Now().After(deadline) {
			break
		}
	}
	if after > before+2 {
		buf := make([]byte, 1<<16)
		tb.Errorf("goroutines: %d before, %d after: leak\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// Keys names the Redis keys of one lock key under prefix, as the backends
// lay them out (package redisnode): tests ask here instead of spelling the
// layout out themselves.
func Keys(prefix, key string) redisnode.Keys { return redisnode.KeysFor(prefix, key) }

// Held reports whether the lock key under prefix is held on rdb: a lease
// is there, not the free record a release leaves.
func Held(tb testing.TB, rdb redis.Scripter, prefix, key string) bool {
	tb.Helper()
	st, err := redisnode.Inspect(context.Background(), rdb, Keys(prefix, key))
	if err != nil {
		tb.Fatalf("redistest: inspecting %q: %v", key, err)
	}
	return st.Held
}

// Expire ends every holding of key under prefix behind its holders' backs,
// on each client: the lock, the readers and the permits with their tokens
// are deleted, as if their leases had run out. It is the Expire of a
// distlocktest harness.
func Expire(tb testing.TB, prefix, key string, clients ...redis.Cmdable) {
	tb.Helper()
	k := Keys(prefix, key)
	for _, rdb := range clients {
		if err := rdb.Del(context.Background(), k.Lock, k.Readers, k.RTokens, k.Permits, k.Tokens).Err(); err != nil {
			tb.Fatalf("redistest: expiring %q: %v", key, err)
		}
	}
}

// Stored returns every key that the locks under prefix whose names begin
// with name keep on each client (every master, for a Cluster client): the
// Stored of a distlocktest harness.
func Stored(tb testing.TB, prefix, name string, clients ...redis.UniversalClient) []string {
	tb.Helper()
	var all []string
	for _, rdb := range clients {
		keys, err := redisnode.Stored(context.Background(), rdb, prefix, name)
		if err != nil {
			tb.Fatalf("redistest: listing the keys of %q: %v", name, err)
		}
		all = append(all, keys...)
	}
	return all
}

// RejectsBadURLs fails tb for each URL that distlock.Open accepts, or
// refuses with an error other than distlock.ErrInvalidURL: the malformed
// forms every Redis scheme must refuse (no host, a port that is no number,
// an unknown option), then the scheme's own in extra.
func RejectsBadURLs(tb testing.TB, scheme string, extra ...string) {
	tb.Helper()
	bad := []string{
		scheme + "://",
		scheme + "://host:notaport",
		scheme + "://h:1?nosuch=1",
	}
	for _, u := range append(bad, extra...) {
		c, err := distlock.Open(context.Background(), u)
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, distlock.ErrInvalidURL) {
			tb.Errorf("Open(%q) = %v; want ErrInvalidURL", u, err)
		}
	}
}
