package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// newClient returns a go-redis client for addr, closed at cleanup.
func newClient(t testing.TB, addr string) *redis.Client {
	return redistest.Client(t, addr, func(o *redis.Options) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		o.DialerRetries = 0 // go-redis' default, as before
	})
}

// newBackend returns a redislock backend on rdb, closed at cleanup.
func newBackend(t testing.TB, rdb redis.UniversalClient, opts ...redislock.Option) *redislock.Backend {
	b := redislock.New(rdb, opts...)
	t.Cleanup(func() { b.Close() })
	return b
}

func lockKey(key string) string { return redistest.Keys(redislock.DefaultPrefix, key).Lock }

// harnessTTL is the conformance suite's short lease: long enough that a
// watchdog's renewal, every third of it, lands in time on a loaded 2-core
// machine running the race detector.
const harnessTTL = 2 * time.Second

func harness(newRDB func(t testing.TB) redis.UniversalClient, ttl time.Duration) distlocktest.Harness {
	return distlocktest.Harness{
		NewBackend: func(t testing.TB) driver.Backend {
			return newBackend(t, newRDB(t))
		},
		Expire: func(t testing.TB, key string) {
			redistest.Expire(t, redislock.DefaultPrefix, key, newRDB(t))
		},
		Stored: func(t testing.TB, prefix string) []string {
			return redistest.Stored(t, redislock.DefaultPrefix, prefix, newRDB(t))
		},
		TTL: ttl,
	}
}

func TestConformanceStandalone(t *testing.T) {
	srv := testserver.StartRedis(t)
	distlocktest.Run(t, harness(func(t testing.TB) redis.UniversalClient { return newClient(t, srv.Addr()) }, harnessTTL))
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	cl := startCluster(t)
	distlocktest.Run(t, harness(func(t testing.TB) redis.UniversalClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}, harnessTTL))
}

func TestConformanceSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("sentinel suite skipped in -short mode")
	}
	s := testserver.StartSentinel(t)
	distlocktest.Run(t, harness(func(t testing.TB) redis.UniversalClient {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}, harnessTTL))
}

// TestClusterKeysWithBraces: keys whose own braces would cut the hash tag
// short still keep the lock and its counter in one slot.
func TestClusterKeysWithBraces(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	cl := startCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c := distlock.New(newBackend(t, rdb))
	ctx := context.Background()
	for _, key := range []string{"a{b}c", "}x{", "{", "}", "{}", "user:{42}", "plain"} {
		l, err := c.Mutex(key).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", key, err)
		}
		if err := l.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("Refresh(%q): %v", key, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q): %v", key, err)
		}
	}
}

func TestInspectShowsHolder(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	c := distlock.New(b, distlock.WithMetadata(map[string]string{"job": "nightly"}))
	ctx := context.Background()
	key := t.Name()
	info, err := b.Inspect(ctx, key)
	if err != nil || info.Held || info.Token != 0 {
		t.Fatalf("Inspect of a never-locked key: %+v, %v; want free, token 0", info, err)
	}
	l, err := c.Mutex(key, distlock.WithTTL(time.Minute)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err = b.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Token != l.Token() || info.TTL <= 50*time.Second || info.TTL > time.Minute {
		t.Errorf("Inspect = %+v; want held, token %d, TTL near 1m", info, l.Token())
	}
	if info.Meta["job"] != "nightly" || info.Meta["pid"] == "" || info.Meta["host"] == "" || info.Meta["since"] == "" {
		t.Errorf("Meta = %v; want job, host, pid and since", info.Meta)
	}
	_ = l.Unlock(ctx)
	info, _ = b.Inspect(ctx, key)
	if info.Held || info.Token != l.Token() {
		t.Errorf("after Unlock Inspect = %+v; want free with last token %d", info, l.Token())
	}
}

// TestInvalidInput: misuse gets an error, never a panic.
func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	var nilClient *redis.Client
	for name, b := range map[string]*redislock.Backend{
		"nil client": redislock.New(nil),
		"typed nil":  redislock.New(nilClient),
	} {
		if _, err := distlock.New(b).Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("%s: TryLock: %v; want ErrInvalidBackend", name, err)
		}
		lockFails(t, name, b)
		if err := b.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()), redislock.WithReplicas(-1, time.Second))
	if _, err := distlock.New(b).Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("WithReplicas(-1): TryLock: %v; want ErrInvalidBackend", err)
	}
	lockFails(t, "WithReplicas(-1)", b)

	// An invalid option fails every call, the first grant included.
	nd := newBackend(t, newClient(t, srv.Addr()), redislock.WithDrift(nil))
	if _, err := distlock.New(nd).Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) ||
		!strings.Contains(err.Error(), "WithDrift") {
		t.Errorf("WithDrift(nil): TryLock: %v; want ErrInvalidBackend naming WithDrift", err)
	}
	lockFails(t, "WithDrift(nil)", nd)

	// Called directly, the backend checks what the front end would.
	good := newBackend(t, newClient(t, srv.Addr()))
	if _, err := good.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "", Owner: "o"}, TTL: time.Second}); !errors.Is(err, driver.ErrInvalidKey) {
		t.Errorf("Acquire of an empty key: %v; want driver.ErrInvalidKey", err)
	}
	if _, err := good.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: 500 * time.Microsecond}); err == nil {
		t.Error("Acquire with a TTL below a millisecond succeeded")
	}
	held := driver.Lease{Key: "sub-ms", Owner: "o"}
	if g, err := good.Acquire(ctx, driver.Request{Lease: held, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if _, err := good.Refresh(ctx, held, 500*time.Microsecond); err == nil {
		t.Error("Refresh to a TTL below a millisecond succeeded")
	}
	if info, err := good.Inspect(ctx, held.Key); err != nil || !info.Held {
		t.Errorf("after a refused sub-millisecond Refresh: %+v, %v; want the lock still held", info, err)
	}
}

// lockFails checks that Lock on b, a backend set up wrongly, fails at once
// rather than retrying until its context ends.
func lockFails(t *testing.T, name string, b *redislock.Backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := distlock.New(b).Mutex("k").Lock(ctx)
	if !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("%s: Lock: %v; want ErrInvalidBackend", name, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("%s: Lock took %v to fail; a backend set up wrongly is not worth retrying", name, d)
	}
}

// TestAmbiguousReplyResolved: the acquire reaches the server, but its reply
// is lost. Lock retries with the same owner token and is granted the same
// lock, instead of waiting for its own lock to expire.
func TestAmbiguousReplyResolved(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	var dropped atomic.Int32
	rdb.AddHook(dropFirstReply{&dropped})
	c := distlock.New(newBackend(t, rdb), distlock.WithTTL(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Mutex(t.Name()).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after a lost reply: %v", err)
	}
	if dropped.Load() != 1 {
		t.Fatalf("the fault was not injected")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Lock took %v; the lost reply was not resolved by the retry", d)
	}
	k := redistest.Keys(redislock.DefaultPrefix, t.Name())
	st, err := redisnode.Inspect(ctx, newClient(t, srv.Addr()), k)
	if err != nil || st.Token != l.Token() {
		t.Errorf("server state %+v, %v; want the handle's token %d", st, err, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	// Free, the lock reports the last token issued.
	if st, err := redisnode.Inspect(ctx, newClient(t, srv.Addr()), k); err != nil || st.Held || st.Token != l.Token() {
		t.Errorf("after Unlock: %+v, %v; want free with the last token issued the handle's %d: one token issued, not two", st, err, l.Token())
	}
}

// dropFirstReply lets the first script call run on the server, then
// reports a timeout instead of its reply.
type dropFirstReply struct{ n *atomic.Int32 }

func (dropFirstReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (dropFirstReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h dropFirstReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && err == nil && h.n.CompareAndSwap(0, 1) {
			return &net.OpError{Op: "read", Err: errors.New("i/o timeout (injected)")}
		}
		return err
	}
}

// TestPausedServerEndsLease: a server that stops answering for longer than
// the TTL cannot confirm renewals, so the holder's Done closes by its
// ValidUntil — before another client could take the key.
func TestPausedServerEndsLease(t *testing.T) {
	srv := testserver.StartRedis(t)
	ttl := time.Second
	c := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(ttl))
	l, err := c.Mutex(t.Name()).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	deadline := l.ValidUntil()
	select {
	case <-l.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("Done not closed %v after the server paused", ttl+2*time.Second)
	}
	// Done must not be later than ValidUntil, but for a timer that fires
	// late on a busy machine: half the TTL, where a Done that waited for
	// the next renewal's turn would be a TTL late.
	if late := time.Since(deadline); late > ttl/2 {
		t.Errorf("Done closed %v after ValidUntil", late)
	}
	if !errors.Is(l.Err(), distlock.ErrLockLost) {
		t.Errorf("Err() = %v; want ErrLockLost", l.Err())
	}
}

// TestKilledServer: every call returns an error within its ctx deadline
// (a release, Unlock's or a failed attempt's give-back, within the release
// timeout), nothing hangs or leaks, and locking works again after a
// restart.
func TestKilledServer(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	// The server comes back empty: the restart guard holds new grants
	// back until it has run for the maximum lease length.
	c := distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(time.Second)), distlock.WithTTL(time.Second),
		distlock.WithReleaseTimeout(time.Second))
	m := c.Mutex(t.Name())
	held, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	srv.Kill(t)

	bounded := func(name string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if err == nil {
			t.Errorf("%s with the server down: no error", name)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("%s took %v with a 500ms deadline and a 1s release timeout", name, d)
		}
	}
	bounded("TryLock", func(ctx context.Context) error { _, err := m.TryLock(ctx); return err })
	bounded("Lock", func(ctx context.Context) error {
		_, err := m.Lock(ctx)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock error %v does not wrap the deadline", err)
		}
		return err
	})
	bounded("Refresh", func(ctx context.Context) error { return held.Refresh(ctx, time.Second) })
	bounded("Unlock", func(ctx context.Context) error { return held.Unlock(ctx) })

	srv.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after restart: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock after restart: %v", err)
	}
	// Goroutines settle back (watchdogs and retries ended).
	redistest.GoroutinesSettle(t, before, time.Second)
}

// TestHandoffIsNotified: with 8 contending goroutines, a waiter takes the
// lock within a few round trips of its release. The bound is generous; the
// benchmarks measure the real figure.
func TestHandoffIsNotified(t *testing.T) {
	srv := testserver.StartRedis(t)
	const workers, perWorker = 8, 10
	var (
		mu       sync.Mutex
		released time.Time
		gaps     []time.Duration
		wg       sync.WaitGroup
		inside   atomic.Int32
	)
	for w := range workers {
		// A safety poll of 10s: only a notification explains a fast handoff.
		c := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(10*time.Second), distlock.WithSafetyPoll(10*time.Second))
		m := c.Mutex(t.Name())
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for range perWorker {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				got := time.Now()
				if inside.Add(1) != 1 {
					t.Errorf("two holders at once")
				}
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, got.Sub(released))
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	if len(gaps) == 0 {
		t.Fatal("no handoffs recorded")
	}
	mean := sum / time.Duration(len(gaps))
	t.Logf("%d handoffs, mean %v", len(gaps), mean)
	if mean > 100*time.Millisecond {
		t.Errorf("mean handoff %v; want well under 100ms (notified, not polled)", mean)
	}
}

// TestReplicas: WAIT confirms the lock on the replica; asking for more
// replicas than exist fails clearly and leaves no lock behind.
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("sentinel setup skipped in -short mode")
	}
	s := testserver.StartSentinel(t)
	rdb := newClient(t, s.Master.Addr())
	ctx := context.Background()
	ok := distlock.New(newBackend(t, rdb, redislock.WithReplicas(1, time.Second)))
	l, err := ok.Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with 1 replica: %v", err)
	}
	replica := newClient(t, s.Replica.Addr())
	if v, err := replica.Get(ctx, lockKey(t.Name())).Result(); err != nil || v == "" {
		t.Errorf("replica does not have the lock right after WAIT: %q, %v", v, err)
	}
	_ = l.Unlock(ctx)

	tooMany := distlock.New(newBackend(t, rdb, redislock.WithReplicas(2, 200*time.Millisecond)))
	_, err = tooMany.Mutex(t.Name()).TryLock(ctx)
	if !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("TryLock wanting 2 replicas of 1: %v; want ErrNotReplicated", err)
	}
	if redistest.Held(t, rdb, redislock.DefaultPrefix, t.Name()) {
		t.Errorf("an unreplicated lock was left behind")
	}
}

// TestSentinelFailover: a lock taken before a failover is still held after
// it (it was replicated with WAIT), the client follows the new master, and
// the lock can be refreshed and released there.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("sentinel setup skipped in -short mode")
	}
	s := testserver.StartSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c := distlock.New(newBackend(t, rdb, redislock.WithReplicas(1, time.Second)), distlock.WithTTL(time.Minute))
	ctx := context.Background()
	l, err := c.Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := s.Master.Addr()
	s.Failover(t)
	if s.Master.Addr() == old {
		t.Fatalf("failover did not change the master")
	}
	// A renewal, like the acquisition, needs a replica to confirm it: wait
	// until the old master follows the new one.
	s.WaitSynced(t)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var rerr error
	for rctx.Err() == nil { // the client needs a moment to follow
		if rerr = l.Refresh(rctx, time.Minute); rerr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rerr != nil {
		t.Fatalf("Refresh after failover: %v", rerr)
	}
	if _, err := c.Mutex(t.Name()).TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("TryLock by another after failover: %v; want ErrNotObtained (the lock survived)", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock after failover: %v", err)
	}
}

func TestOpenURL(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	declareFresh(t, redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3}), redislock.WithPrefix("app:"))
	c, err := distlock.Open(ctx, fmt.Sprintf("redis://%s/3?prefix=app:", srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Mutex("job").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3})
	defer rdb.Close()
	if n, _ := rdb.Exists(ctx, redistest.Keys("app:", "job").Lock).Result(); n != 1 {
		t.Errorf("lock not under the URL's prefix in db 3")
	}
	redistest.RejectsBadURLs(t, "redis",
		"redis+sentinel://h:1",
		"redis+sentinel://h:1/m/x",
		"redis+sentinel://h/m",
		"redis+cluster://h:1/0",
		"redis+cluster://h:99999",
		"redis://h:99999",
		"redis://h:0",
		"redis://h:1?prefix=a&prefix=b",
		"redis://h:1?max_ttl=1m&max_ttl=2m",
		"redis+sentinel://h:1/m?prefix=a&prefix=b",
	)
}

// TestWaitersShareOneSubscription: many waiting goroutines of one client
// share one pub/sub connection, and waiting again for the same lock does
// not subscribe again.
func TestWaitersShareOneSubscription(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	c := distlock.New(newBackend(t, rdb), distlock.WithTTL(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := t.Name()
	for round := range 3 {
		holder, err := c.Mutex(key).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := c.Mutex(key).Lock(ctx)
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				_ = l.Unlock(ctx)
			}()
		}
		time.Sleep(100 * time.Millisecond) // all six are waiting
		if n := pubsubConns(t, srv); n != 1 {
			t.Errorf("round %d: %d pub/sub connections for one client; want 1", round, n)
		}
		_ = holder.Unlock(ctx)
		wg.Wait()
	}
	if n := commandCalls(t, srv, "subscribe"); n != 1 {
		t.Errorf("SUBSCRIBE called %d times over 3 rounds of waiting; want 1", n)
	}
}

func pubsubConns(t *testing.T, srv *testserver.Redis) int {
	t.Helper()
	out, err := srv.Do(t, "CLIENT", "LIST", "TYPE", "pubsub")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func commandCalls(t *testing.T, srv *testserver.Redis, cmd string) int {
	t.Helper()
	out, err := srv.Do(t, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// TestFairWakesOnlyTheNextWaiter: a release hands the lock to the oldest
// live fair waiter and wakes it alone, so the others sleep on; when that
// waiter gives the lock up, the next one is woken.
func TestFairWakesOnlyTheNextWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := t.Name()
	lease := func(owner string) driver.Lease { return driver.Lease{Key: key, Owner: owner} }
	acquire := func(owner string) bool {
		t.Helper()
		g, err := b.Acquire(ctx, driver.Request{Lease: lease(owner), TTL: 10 * time.Second, Fair: true, Queue: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return g.Acquired
	}
	if !acquire("holder") || acquire("first") || acquire("second") {
		t.Fatal("setup: want holder granted, first and second queued")
	}
	w1, err := b.Watch(ctx, key, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	w2, err := b.Watch(ctx, key, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	fired := func(w driver.Watch, within time.Duration) bool {
		select {
		case <-w.C():
			return true
		case <-time.After(within):
			return false
		}
	}
	if err := b.Release(ctx, lease("holder")); err != nil {
		t.Fatal(err)
	}
	if !fired(w1, 2*time.Second) {
		t.Fatal("the release did not wake the first waiter")
	}
	if fired(w2, 200*time.Millisecond) {
		t.Error("the release woke the second waiter too; want only the one whose turn it is")
	}
	// The release handed the lock to the first waiter, which gives it up.
	if err := b.Release(ctx, lease("first")); err != nil {
		t.Fatalf("Release by the waiter the lock was handed to: %v", err)
	}
	if !fired(w2, 2*time.Second) {
		t.Fatal("the first waiter gave up, but the second was not woken")
	}
	if !acquire("second") {
		t.Error("the second waiter, now first, was not granted the free lock")
	}
}

// TestReleaseAnnouncedOnlyWhenWaited: the release of a lease that nobody
// asked for publishes nothing, and an uncontended acquire and release cost
// two scripts of seven commands in all (eight when fair): the acquire reads
// the lock key and the counter in one MGET, reads the clock and writes the
// lease; the release reads the lease and writes the free record over it.
// A lease that refused an attempt is announced when released, fair or not.
func TestReleaseAnnouncedOnlyWhenWaited(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, fair := range []bool{false, true} {
		key := fmt.Sprintf("%s-%v", t.Name(), fair)
		req := func(owner string) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second, Fair: fair}
		}
		cycle := func(owner string) {
			t.Helper()
			if g, err := b.Acquire(ctx, req(owner)); err != nil || !g.Acquired {
				t.Fatalf("Acquire(%s) = %+v, %v", owner, g, err)
			}
			if err := b.Release(ctx, req(owner).Lease); err != nil {
				t.Fatal(err)
			}
		}
		cycle("warm-up") // the key's first grant meets the restart guard
		pubs, total := commandCalls(t, srv, "publish"), srv.Commands(t)
		cycle("a")
		if n := commandCalls(t, srv, "publish") - pubs; n != 0 {
			t.Errorf("fair %v: %d PUBLISH for the release of a lease nobody waited for; want 0", fair, n)
		}
		// A fair acquire also looks for a queue.
		if n, most := srv.Commands(t)-total, map[bool]int{false: 7, true: 8}[fair]; n > most {
			t.Errorf("fair %v: an uncontended acquire and release ran %d commands; want at most %d", fair, n, most)
		}

		if g, err := b.Acquire(ctx, req("holder")); err != nil || !g.Acquired {
			t.Fatalf("Acquire = %+v, %v", g, err)
		}
		w, err := b.Watch(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		if g, err := b.Acquire(ctx, req("waiter")); err != nil || g.Acquired {
			t.Fatalf("Acquire = %+v, %v; want refused", g, err)
		}
		if err := b.Release(ctx, req("holder").Lease); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.C():
		case <-time.After(5 * time.Second):
			t.Errorf("fair %v: the release of a lease that refused a waiter woke nobody", fair)
		}
		w.Close()
		_ = b.Release(ctx, req("waiter").Lease)
	}
}

// TestFairHandover: the release that makes it a fair waiter's turn hands
// the lock to that waiter, which holds it without another request: the
// handoff costs the release's one script, and the waiter's lease is its
// place's length until the new holder extends it, which a Mutex does at
// once.
func TestFairHandover(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := t.Name()
	const ttl, place = 30 * time.Second, 3 * time.Second
	holder, waiter := newBackend(t, rdb), newBackend(t, newClient(t, srv.Addr()))
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: ttl, Fair: true, Queue: place}
	}
	h, err := holder.Acquire(ctx, req("holder"))
	if err != nil || !h.Acquired {
		t.Fatalf("Acquire = %+v, %v", h, err)
	}
	// The waiter does what a Mutex does: an attempt, the watch, and the
	// attempt again.
	if g, err := waiter.Acquire(ctx, req("waiter")); err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	w, err := waiter.Watch(ctx, key, "waiter")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sent := time.Now()
	if g, err := waiter.Acquire(ctx, req("waiter")); err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	before := commandCalls(t, srv, "evalsha")
	if err := holder.Release(ctx, req("holder").Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatal("the release did not wake the waiter")
	}
	g, err := waiter.Acquire(ctx, req("waiter"))
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire after the hand-over = %+v, %v", g, err)
	}
	if n := commandCalls(t, srv, "evalsha") - before; n != 1 {
		t.Errorf("the handoff ran %d scripts; want 1 (the release, which hands the lock over)", n)
	}
	if g.Token <= h.Token {
		t.Errorf("the waiter's token %d is not above the holder's %d", g.Token, h.Token)
	}
	// Counted from the waiter's last attempt, the only moment it knows
	// came before the grant.
	if end := time.Now().Add(g.ValidFor); g.ValidFor <= 0 || end.After(sent.Add(place)) {
		t.Errorf("ValidFor = %v: the lease would end %v after the last attempt was sent; want within its place, %v", g.ValidFor, end.Sub(sent), place)
	}
	info, err := holder.Inspect(ctx, key)
	if err != nil || !info.Held || info.Token != g.Token {
		t.Fatalf("Inspect = %+v, %v; want held with token %d", info, err, g.Token)
	}
	if info.TTL > place {
		t.Errorf("the handed-over lease lasts %v; want at most the waiter's place, %v", info.TTL, place)
	}
	_ = waiter.Release(ctx, req("waiter").Lease)

	// Through a Mutex, the new holder extends the short lease at once.
	c1 := distlock.New(holder, distlock.WithTTL(ttl), distlock.WithFairness())
	c2 := distlock.New(waiter, distlock.WithTTL(ttl), distlock.WithFairness())
	first, err := c1.Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lock, 1)
	go func() {
		l, err := c2.Mutex(key).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	keys := redistest.Keys(redislock.DefaultPrefix, key)
	for rdb.ZCard(ctx, keys.Queue).Val() != 1 {
		if ctx.Err() != nil {
			t.Fatal("the waiter did not queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // its retry done
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Unlock(ctx)
	for time.Until(l.ValidUntil()) <= place {
		if ctx.Err() != nil {
			t.Fatalf("the handed-over lock was not extended: valid for %v more", time.Until(l.ValidUntil()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info, err := holder.Inspect(ctx, key); err != nil || info.TTL <= place {
		t.Errorf("after the extension: %+v, %v; want the TTL renewed past the place", info, err)
	}
}

// TestFairHandoverToVanishedWaiter: a waiter that vanished while in line
// is handed the lock for no longer than its place, so the next waiter gets
// it then, not after a whole TTL.
func TestFairHandoverToVanishedWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := t.Name()
	b := newBackend(t, rdb)
	const ttl, place = 30 * time.Second, time.Second
	req := func(owner string, queue time.Duration) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: ttl, Fair: true, Queue: queue}
	}
	if g, err := b.Acquire(ctx, req("holder", 0)); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	gone := redislock.New(newClient(t, srv.Addr()))
	if g, err := gone.Acquire(ctx, req("gone", place)); err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	gone.Close() // no word to the server: its client died
	if g, err := b.Acquire(ctx, req("next", 5*time.Second)); err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	released := time.Now()
	if err := b.Release(ctx, req("holder", 0).Lease); err != nil {
		t.Fatal(err)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || !info.Held || info.TTL > place {
		t.Fatalf("after the release: %+v, %v; want held by the first in line for at most its place, %v", info, err, place)
	}
	for {
		g, err := b.Acquire(ctx, req("next", 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired {
			break
		}
		if time.Since(released) > ttl/2 {
			t.Fatal("the next waiter waited for the vanished one's whole lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
