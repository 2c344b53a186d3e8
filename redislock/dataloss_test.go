package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// lockTimes takes and frees key n times and returns the last token.
func lockTimes(t *testing.T, m *distlock.Mutex, n int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		l, err := m.TryLock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("token %d after %d", l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// TestRestartWithoutPersistence: a server without persistence is killed
// and restarted empty while a lock is held. With the restart guard (the
// default), nobody gets the lock until the holder's lease has ended, and
// the next token is above the holder's. With the guard off, a new client
// gets the lock while the old lease is valid (the restart's known
// unsafety), but its token is still above the old one: the counter
// resumes at the server clock.
func TestRestartWithoutPersistence(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := "guard"
		opts := []redislock.Option{redislock.WithMaxTTL(2 * time.Second)}
		if !guard {
			name = "guard off"
			opts = []redislock.Option{redislock.WithoutRestartGuard()}
		}
		t.Run(name, func(t *testing.T) {
			srv := testserver.StartRedis(t)
			client := func() *distlock.Mutex {
				b := newBackend(t, newClient(t, srv.Addr()), opts...)
				return distlock.New(b, distlock.WithTTL(2*time.Second), distlock.WithoutAutoRefresh()).Mutex(t.Name())
			}
			m := client()
			lockTimes(t, m, 3)
			held, err := m.TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			srv.Kill(t)
			srv.Restart(t)

			other := client() // a new process, knowing nothing of the old life
			if !guard {
				l, err := other.TryLock(context.Background())
				if err != nil {
					t.Fatalf("TryLock after the restart, guard off: %v; want the old unsafety: granted", err)
				}
				defer l.Unlock(context.Background())
				if time.Now().After(held.ValidUntil()) {
					t.Fatalf("the old lease ended before the new grant: the overlap was not shown")
				}
				t.Logf("guard off: two holders, tokens %d then %d", held.Token(), l.Token())
				if l.Token() <= held.Token() {
					t.Errorf("token %d after the restart; want above the holder's %d", l.Token(), held.Token())
				}
				return
			}
			for time.Now().Before(held.ValidUntil()) {
				if l, err := other.TryLock(context.Background()); err == nil {
					_ = l.Unlock(context.Background())
					t.Fatalf("a second holder (token %d) while the first (token %d) was valid", l.Token(), held.Token())
				}
				time.Sleep(50 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := other.Lock(ctx)
			if err != nil {
				t.Fatalf("Lock once the server has run for the maximum lease: %v", err)
			}
			defer l.Unlock(context.Background())
			if l.Token() <= held.Token() {
				t.Errorf("token %d after the restart; want above the holder's %d", l.Token(), held.Token())
			}
		})
	}
}

// TestFlushAll: after FLUSHALL the tokens go on increasing.
func TestFlushAll(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	b := newBackend(t, rdb)
	m := distlock.New(b).Mutex(t.Name())
	last := lockTimes(t, m, 3)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The flush took the guard's marker too, and the server is young: the
	// guard would hold the key back for a maximum lease. Not what this
	// test is about: declare what the operator knows.
	if err := b.DeclareFresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if next := lockTimes(t, m, 1); next <= last {
		t.Errorf("token %d after FLUSHALL; want above %d", next, last)
	}
}

// TestEviction: on a cache server (allkeys-lru) whose memory fills up with
// other keys, the fencing counter is evicted; the tokens go on increasing.
func TestEviction(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.WithArgs("--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"))
	rdb := newClient(t, srv.Addr())
	// The guard marker may be evicted too; the server is young then, and
	// the guard holds a key whose counter went for one maximum lease.
	m := distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(time.Second)), distlock.WithTTL(time.Second)).Mutex(t.Name())
	last := lockTimes(t, m, 3)
	ctx := context.Background()
	// The last token is kept by the counter and the free record.
	k := redistest.Keys(redislock.DefaultPrefix, t.Name())
	value := strings.Repeat("x", 4096)
	for i := 0; ; i++ {
		if i == 100000 {
			t.Fatalf("the counter and the free record were not evicted after %d cache writes", i)
		}
		if err := rdb.Set(ctx, "cache:"+strconv.Itoa(i), value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if i%64 == 0 {
			if n, err := rdb.Exists(ctx, k.Fence, k.Lock).Result(); err != nil || n == 0 {
				break
			}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := m.Lock(lctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() <= last {
		t.Errorf("token %d after the counter was evicted; want above %d", l.Token(), last)
	}
}

// TestSentinelFailoverToStaleReplica: the replica is held back (stopped)
// while a lock is taken on the master, then the master dies and the stale
// replica is promoted. Its counter is behind, yet the next token is above
// the lost holder's. With WithReplicas, the acquisition made while the
// replica was held back is refused instead of granted.
//
// A stopped replica still receives the replication stream into its socket
// buffer and applies it once resumed; so it is killed instead, and comes
// back from its append-only file with what it had applied: stale.
func TestSentinelFailoverToStaleReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("sentinel setup skipped in -short mode")
	}
	s := testserver.StartSentinel(t, testserver.WithPersistence())
	newRDB := func() redis.UniversalClient {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(),
			ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	ctx := context.Background()
	key := t.Name()
	plain := distlock.New(newBackend(t, newRDB()), distlock.WithTTL(time.Minute)).Mutex(key)
	replicated := distlock.New(newBackend(t, newRDB(), redislock.WithReplicas(1, 300*time.Millisecond)), distlock.WithTTL(time.Minute)).Mutex(key)
	lockTimes(t, replicated, 2)
	// The replica has the counter and the last release: paused before it
	// applied that release, it would bring the lock back when promoted,
	// until its TTL (see Failover in the package documentation).
	waitReplicated(t, s.Master, s.Replica)

	s.Replica.Pause(t)
	if l, err := replicated.TryLock(ctx); !errors.Is(err, redislock.ErrNotReplicated) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("TryLock WithReplicas while the replica is held back: %v; want ErrNotReplicated", err)
	}
	lost, err := plain.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Replica.Kill(t)
	s.Master.Kill(t)
	s.Replica.Restart(t)
	s.Failover(t)

	next := distlock.New(newBackend(t, newRDB()), distlock.WithTTL(time.Minute)).Mutex(key)
	// A failover on a loaded machine can take a while to settle.
	lctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	var l *distlock.Lock
	var earlier error // the last error before the one the deadline cut short
	// The client needs a moment to follow the new master.
	for {
		if l, err = next.TryLock(lctx); err == nil || lctx.Err() != nil {
			break
		}
		earlier = err
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("TryLock on the promoted replica: %v (the attempt before: %v)", err, earlier)
	}
	defer l.Unlock(ctx)
	t.Logf("token %d before the failover (lost with the master), %d after", lost.Token(), l.Token())
	if l.Token() <= lost.Token() {
		t.Errorf("token %d on the promoted replica; want above the lost holder's %d", l.Token(), lost.Token())
	}
}

// waitReplicated waits until replica has applied every write master has
// made so far: its replication offset has reached the master's.
func waitReplicated(t *testing.T, master, replica *testserver.Redis) {
	t.Helper()
	offset := func(srv *testserver.Redis, field string) int64 {
		t.Helper()
		info, err := srv.Do(t, "INFO", "replication")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s %q: %v", field, v, err)
				}
				return n
			}
		}
		t.Fatalf("INFO replication of %s has no %s", srv.Addr(), field)
		return 0
	}
	want := offset(master, "master_repl_offset")
	for deadline := time.Now().Add(30 * time.Second); offset(replica, "slave_repl_offset") < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not reach the master's replication offset %d within 30s", want)
		}
	}
}

// TestRefreshWaitsForReplicas: with WithReplicas, a renewal that no
// replica confirms fails, so the holder's deadline does not move past what
// a promoted replica would know.
func TestRefreshWaitsForReplicas(t *testing.T) {
	master := testserver.StartRedis(t)
	replica := testserver.StartReplica(t, master)
	b := newBackend(t, newClient(t, master.Addr()), redislock.WithReplicas(1, 500*time.Millisecond))
	c := distlock.New(b, distlock.WithTTL(10*time.Second), distlock.WithoutAutoRefresh())
	ctx := context.Background()
	// A replica that has just started may still be syncing: retry until
	// it confirms (each failed attempt released its lock).
	var l *distlock.Lock
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l, err = c.Mutex(t.Name()).TryLock(ctx)
		if !errors.Is(err, redislock.ErrNotReplicated) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	before := l.ValidUntil()
	replica.Pause(t)
	err = l.Refresh(ctx, 10*time.Second)
	replica.Resume(t)
	if !errors.Is(err, redislock.ErrNotReplicated) {
		t.Errorf("Refresh with the replica held back: %v; want ErrNotReplicated", err)
	}
	if l.ValidUntil() != before {
		t.Errorf("ValidUntil moved from %v to %v on an unconfirmed renewal", before, l.ValidUntil())
	}
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Errorf("Refresh with the replica back: %v", err)
	}
}

// TestRestartGuardFirstUse: a server the guard cannot tell from one that
// lost its data holds new keys back, with a hint, until it has run for the
// maximum lease length or is declared fresh; keys it knows are not held.
func TestRestartGuardFirstUse(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.AsRestarted())
	b := newBackend(t, newClient(t, srv.Addr()))
	c := distlock.New(b, distlock.WithTTL(time.Second))
	ctx := context.Background()
	if _, err := c.Mutex("new").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("TryLock of a new key on an undeclared new server: %v; want ErrNotObtained", err)
	}
	info, err := b.Inspect(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if w := warnings(info); !strings.Contains(w, "restart guard") {
		t.Errorf("Inspect warnings %q; want the restart guard named", w)
	}
	if err := b.DeclareFresh(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("new").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after DeclareFresh: %v", err)
	}
	_ = l.Unlock(ctx)

	// Without a declaration, the wait ends when the server has run for the
	// maximum lease length.
	srv2 := testserver.StartRedis(t, testserver.AsRestarted())
	c2 := distlock.New(newBackend(t, newClient(t, srv2.Addr()), redislock.WithMaxTTL(time.Second)), distlock.WithTTL(time.Second))
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	l, err = c2.Mutex("new").Lock(lctx)
	if err != nil {
		t.Fatalf("Lock on a young server with a 1s maximum lease: %v", err)
	}
	t.Logf("granted after %v", time.Since(start))
	_ = l.Unlock(ctx)
}

// TestMaxTTL: leases longer than the maximum fail at once with an error
// that says how to allow them; a maximum that is not positive fails every
// call; with the guard off there is no maximum.
func TestMaxTTL(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	c := distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(time.Minute)), distlock.WithTTL(2*time.Minute))
	_, err := c.Mutex(t.Name()).TryLock(ctx)
	if err == nil || !strings.Contains(err.Error(), "WithMaxTTL") || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryLock with a TTL above the maximum: %v; want an error naming WithMaxTTL", err)
	}
	// Below distlock's default TTL too: the refusal is ErrInvalidTTL, not
	// a generic one.
	c = distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(10*time.Second)), distlock.WithTTL(20*time.Second))
	if _, err := c.Mutex(t.Name()).Lock(ctx); !errors.Is(err, distlock.ErrInvalidTTL) || !errors.Is(err, driver.ErrTTLTooLong) {
		t.Errorf("Lock with a TTL of 20s above a maximum of 10s: %v; want distlock.ErrInvalidTTL and driver.ErrTTLTooLong", err)
	}
	l, err := distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(time.Minute)), distlock.WithTTL(time.Minute)).Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock at the maximum: %v", err)
	}
	if err := l.Refresh(ctx, 2*time.Minute); err == nil || !strings.Contains(err.Error(), "WithMaxTTL") {
		t.Errorf("Refresh above the maximum: %v; want an error naming WithMaxTTL", err)
	}
	_ = l.Unlock(ctx)
	if _, err := distlock.New(newBackend(t, rdb, redislock.WithMaxTTL(0))).Mutex(t.Name()).TryLock(ctx); err == nil {
		t.Errorf("TryLock with WithMaxTTL(0): no error")
	}
	l, err = distlock.New(newBackend(t, rdb, redislock.WithoutRestartGuard()), distlock.WithTTL(time.Hour)).Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock of an hour without the guard: %v", err)
	}
	_ = l.Unlock(ctx)
}

// TestURLGuardOptions: max_ttl and restart_guard in a URL.
func TestURLGuardOptions(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	for _, tt := range []struct {
		query string
		ttl   time.Duration
		ok    bool
	}{
		{"", 2 * time.Minute, false},
		{"?max_ttl=2m", 2 * time.Minute, true},
		{"?restart_guard=off", time.Hour, true},
	} {
		c, err := distlock.Open(ctx, "redis://"+srv.Addr()+"/0"+tt.query, distlock.WithTTL(tt.ttl))
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Mutex(t.Name()).TryLock(ctx)
		if (err == nil) != tt.ok {
			t.Errorf("%q, TTL %v: TryLock: %v; want success: %v", tt.query, tt.ttl, err, tt.ok)
		}
		if err == nil {
			_ = l.Unlock(ctx)
		}
		c.Close()
	}
	for _, bad := range []string{"?max_ttl=0s", "?max_ttl=x", "?restart_guard=maybe"} {
		if c, err := distlock.Open(ctx, "redis://"+srv.Addr()+"/0"+bad); !errors.Is(err, distlock.ErrInvalidURL) {
			if c != nil {
				c.Close()
			}
			t.Errorf("Open(%q): %v; want ErrInvalidURL", bad, err)
		}
	}
}
