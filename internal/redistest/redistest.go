// Package redistest holds the test plumbing shared by the tests of the
// Redis backends (redislock and redlock): client setup and the check that
// goroutines settle back after a test.
package redistest

import (
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
