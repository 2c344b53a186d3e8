package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// startNodes starts n independent redis-servers.
func startNodes(t testing.TB, n int, opts ...testserver.Option) []*testserver.Redis {
	t.Helper()
	srvs := make([]*testserver.Redis, n)
	for i := range srvs {
		srvs[i] = testserver.StartRedis(t, opts...)
	}
	return srvs
}

func addrsOf(srvs []*testserver.Redis) []string {
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		addrs[i] = s.Addr()
	}
	return addrs
}

// newClients returns one go-redis client per address, closed at cleanup.
func newClients(t testing.TB, addrs []string) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		cs[i] = redistest.Client(t, a)
	}
	return cs
}

// newBackend returns a backend on fresh clients of addrs, closed at cleanup.
func newBackend(t testing.TB, addrs []string, opts ...redlock.Option) *redlock.Backend {
	t.Helper()
	b := redlock.New(newClients(t, addrs), opts...)
	t.Cleanup(func() { b.Close() })
	return b
}

func lockKey(key string) string { return redistest.Keys(redlock.DefaultPrefix, key).Lock }

func fenceKey(key string) string { return redistest.Keys(redlock.DefaultPrefix, key).Fence }

// onNodes runs a command on every node directly, for setup and checks.
func onNodes(t testing.TB, srvs []*testserver.Redis, args ...string) []string {
	t.Helper()
	out := make([]string, len(srvs))
	for i, s := range srvs {
		v, err := s.Do(t, args...)
		if err != nil && !errors.Is(err, testserver.ErrNil) {
			t.Fatalf("%s %v: %v", s.Addr(), args, err)
		}
		out[i] = v
	}
	return out
}

// leased reports whether v, the value of a lock key, is a lease: not
// missing, and not the free record a release leaves (which begins with a
// line feed).
func leased(v string) bool { return v != "" && !strings.HasPrefix(v, "\n") }

func harness(addrs []string, ttl time.Duration) distlocktest.Harness {
	return distlocktest.Harness{
		NewBackend: func(t testing.TB) driver.Backend {
			return newBackend(t, addrs)
		},
		Expire: func(t testing.TB, key string) {
			for _, rdb := range newClients(t, addrs) {
				redistest.Expire(t, redlock.DefaultPrefix, key, rdb)
			}
		},
		Stored: func(t testing.TB, prefix string) []string {
			return stored(t, newClients(t, addrs), prefix)
		},
		TTL: ttl,
	}
}

// stored lists the Redis keys, on any of the nodes of clients, of the lock
// keys whose names begin with prefix: the union of a SCAN of every node.
func stored(t testing.TB, clients []redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	for _, rdb := range clients {
		iter := rdb.Scan(ctx, 0, redlock.DefaultPrefix+"{*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			// "{name}suffix", or "{#hash}name suffix" for a name with braces.
			rest := strings.TrimPrefix(k, redlock.DefaultPrefix+"{")
			if strings.HasPrefix(rest, "#") {
				rest = rest[strings.Index(rest, "}")+1:]
			}
			if strings.HasPrefix(rest, prefix) {
				seen[k] = true
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("SCAN: %v", err)
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// conformanceTTL is the suite's short lease: long enough for the watchdog
// to renew it through a quorum beside CPU hogs under -race (its node
// timeout is DefaultNodeTimeout's 500ms). At 1s, WatchdogKeepsLock lost
// leases on a loaded machine.
const conformanceTTL = 2 * time.Second

func TestConformance(t *testing.T) {
	srvs := startNodes(t, 5)
	distlocktest.Run(t, harness(addrsOf(srvs), conformanceTTL))
}

func TestConformanceThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("second suite run skipped in -short mode")
	}
	srvs := startNodes(t, 3)
	distlocktest.Run(t, harness(addrsOf(srvs), conformanceTTL))
}

// TestLockIsOnEveryNode: an uncontended acquisition takes the key on every
// node with the same token, and Inspect reports the holder.
func TestLockIsOnEveryNode(t *testing.T) {
	srvs := startNodes(t, 5)
	b := newBackend(t, addrsOf(srvs))
	c := distlock.New(b, distlock.WithMetadata(map[string]string{"job": "nightly"}))
	ctx := context.Background()
	key := t.Name()
	l, err := c.Mutex(key, distlock.WithTTL(time.Minute)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Nodes whose clocks stepped into the next TokenGrain during the
	// acquisition issue a larger token: the largest is the lock's, written
	// back to the counters of a quorum.
	for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
		f := strings.Split(v, "\n")
		if token, err := strconv.ParseUint(f[min(1, len(f)-1)], 10, 64); len(f) < 2 || err != nil || token > l.Token() {
			t.Errorf("node %d holds %q; want the lock with a token of at most %d", i, v, l.Token())
		}
	}
	confirmed := 0
	for _, v := range onNodes(t, srvs, "GET", fenceKey(key)) {
		if n, _ := strconv.ParseUint(v, 10, 64); n >= l.Token() {
			confirmed++
		}
	}
	if confirmed < 3 {
		t.Errorf("the counters of %d nodes reached the token %d; want a quorum", confirmed, l.Token())
	}
	info, err := b.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Token != l.Token() || info.TTL <= 50*time.Second || info.Meta["job"] != "nightly" {
		t.Errorf("Inspect = %+v; want held, token %d, TTL near 1m, job=nightly", info, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
		if leased(v) {
			t.Errorf("node %d still has the lock after Unlock", i)
		}
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Held || info.Token != l.Token() {
		t.Errorf("Inspect after Unlock = %+v, %v; want free, last token %d", info, err, l.Token())
	}
}

// TestInvalidInput: misuse gets an error from every call, never a panic.
func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	var typedNil *redis.Client
	srv := testserver.StartRedis(t)
	ok := newClients(t, []string{srv.Addr()})[0]
	cases := []struct {
		name    string
		b       *redlock.Backend
		wantMsg string
	}{
		{"no clients", redlock.New(nil), "no nodes"},
		{"empty slice", redlock.New([]redis.UniversalClient{}), "no nodes"},
		{"nil client", redlock.New([]redis.UniversalClient{ok, nil}), "client 1 of 2 is nil"},
		{"typed nil client", redlock.New([]redis.UniversalClient{typedNil}), "client 0 of 1 is nil"},
		{"same master twice", redlock.New([]redis.UniversalClient{ok, newClients(t, []string{srv.Addr()})[0]}), "both connect to " + srv.Addr()},
		{"zero node timeout", redlock.New([]redis.UniversalClient{ok}, redlock.WithNodeTimeout(0)), "WithNodeTimeout"},
		{"nil drift", redlock.New([]redis.UniversalClient{ok}, redlock.WithDrift(nil)), "WithDrift"},
		{"nil backend", nil, "no nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			check := func(op string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("%s: %v; want an error saying %q", op, err, tc.wantMsg)
				}
			}
			_, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second})
			check("Acquire", err)
			_, err = b.Refresh(ctx, driver.Lease{Key: "k", Owner: "o"}, time.Second)
			check("Refresh", err)
			check("Release", b.Release(ctx, driver.Lease{Key: "k", Owner: "o"}))
			_, err = b.Watch(ctx, "k", "")
			check("Watch", err)
			_, err = b.Inspect(ctx, "k")
			check("Inspect", err)
			_, err = distlock.New(b).Mutex("k").TryLock(ctx)
			if tc.b == nil { // distlock.New refuses a nil pointer before the backend is asked
				if !errors.Is(err, distlock.ErrInvalidBackend) {
					t.Errorf("TryLock: %v; want ErrInvalidBackend", err)
				}
			} else {
				check("TryLock", err)
			}
			// Not retried: Lock fails at once, not when its context ends.
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			if _, err := distlock.New(b).Mutex("k").Lock(lctx); !errors.Is(err, distlock.ErrInvalidBackend) {
				t.Errorf("Lock: %v; want ErrInvalidBackend", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Lock took %v to fail on a backend set up wrongly", d)
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}

	b := newBackend(t, []string{srv.Addr()}, redlock.WithDrift(func(ttl time.Duration) time.Duration { return ttl }))
	if _, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}); err == nil || !strings.Contains(err.Error(), "drift") {
		t.Errorf("Acquire with a drift as long as the TTL: %v; want an error about the drift", err)
	}
	if _, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: 0}); err == nil {
		t.Errorf("Acquire with TTL 0 succeeded")
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, err := b.Acquire(nil, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}); err == nil {
		t.Errorf("Acquire with a nil context succeeded")
	}
}

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		cs := make([]redis.UniversalClient, n)
		for i := range cs {
			cs[i] = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
			defer cs[i].Close()
		}
		b := redlock.New(cs)
		if got := b.Quorum(); got != want {
			t.Errorf("%d nodes: quorum %d, want %d", n, got, want)
		}
		b.Close()
	}
}

func TestOpenURL(t *testing.T) {
	srvs := startNodes(t, 3)
	ctx := context.Background()
	u := fmt.Sprintf("redlock://%s,%s,%s/2?prefix=app:&node_timeout=200ms", srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr())
	declareFresh(t, u)
	c, err := distlock.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("job").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srvs {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: 2})
		if n, _ := rdb.Exists(ctx, redistest.Keys("app:", "job").Lock).Result(); n != 1 {
			t.Errorf("%s: lock not under the URL's prefix in db 2", s.Addr())
		}
		rdb.Close()
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	redistest.RejectsBadURLs(t, "redlock",
		"redlock://h:1,h:notaport",
		"redlock://h:1,:2",
		"redlock://h:1,h:99999",
		"redlock://h:1/x",
		"redlock://h:1?prefix=a&prefix=b",
		"redlock://h:99999",
		"redlock://h:1?node_timeout=0",
		"redlock://h:1?node_timeout=fast",
		"redlock://h:1,h:1",
	)
}

// TestRefreshNeedsQuorum: a renewal succeeds only where a quorum still
// holds the lock, and gives the lock back to the nodes that lost it.
func TestRefreshNeedsQuorum(t *testing.T) {
	srvs := startNodes(t, 5)
	b := newBackend(t, addrsOf(srvs))
	ctx := context.Background()
	acquire := func(key string) {
		t.Helper()
		if g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "o"}, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
	}
	lose := func(key string, nodes ...int) {
		t.Helper()
		for _, i := range nodes {
			if _, err := srvs[i].Do(t, "DEL", lockKey(key)); err != nil {
				t.Fatal(err)
			}
		}
	}

	acquire("two-lost")
	lose("two-lost", 0, 3)
	// Re-taking is best effort: a refresh returns once a quorum renewed, so
	// a slow node's answer may come after it. A few refreshes must get
	// every node back.
	var missing []int
	for range 20 {
		if _, err := b.Refresh(ctx, driver.Lease{Key: "two-lost", Owner: "o"}, time.Minute); err != nil {
			t.Fatalf("Refresh with 3 of 5 nodes holding: %v", err)
		}
		missing = missing[:0]
		for i, v := range onNodes(t, srvs, "GET", lockKey("two-lost")) {
			if !strings.HasPrefix(v, "o\n") {
				missing = append(missing, i)
			}
		}
		if len(missing) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("nodes %v still lack the lock after 20 refreshes; want it taken back", missing)
	}

	acquire("three-lost")
	lose("three-lost", 1, 2, 4)
	if _, err := b.Refresh(ctx, driver.Lease{Key: "three-lost", Owner: "o"}, time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh with 2 of 5 nodes holding: %v; want driver.ErrNotHeld", err)
	}
	if err := b.Release(ctx, driver.Lease{Key: "three-lost", Owner: "o"}); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release with 2 of 5 nodes holding: %v; want driver.ErrNotHeld", err)
	}
}

// TestStored: the harness's Stored sees the keys of the names under a
// prefix, braces included, on any node, and no others.
func TestStored(t *testing.T) {
	srvs := startNodes(t, 3)
	cs := newClients(t, addrsOf(srvs))
	ctx := context.Background()
	c := distlock.New(newBackend(t, addrsOf(srvs)))
	for _, key := range []string{"p:a", "p:{b}", "q:c"} {
		l, err := c.Mutex(key).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
	}
	if _, err := srvs[1].Do(t, "DEL", lockKey("p:a")); err != nil { // held on the others
		t.Fatal(err)
	}
	got := stored(t, cs, "p:")
	for _, want := range []string{lockKey("p:a"), lockKey("p:{b}")} {
		if !slices.Contains(got, want) {
			t.Errorf("Stored(p:) = %q; want it to include %q", got, want)
		}
	}
	for _, k := range got {
		if strings.Contains(k, "q:c") {
			t.Errorf("Stored(p:) = %q; includes a key of q:c", got)
		}
	}
}
