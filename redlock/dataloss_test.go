package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// TestOneOfFiveRestartedEmpty: a lock is held on exactly a quorum of five
// masters, {0, 1, 2}, while 3 and 4 are cut off; then master 2 restarts
// without its data and the cut heals. The restart guard keeps master 2 from
// granting anything new until it has run for the maximum lease length, so
// no second client gets a quorum ({2, 3, 4}) while the first lease is
// valid. With the guard off, one does: Redlock's known unsafety.
func TestOneOfFiveRestartedEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("restart scenario skipped in -short mode")
	}
	for _, guard := range []bool{true, false} {
		name, opts := "guard", []redlock.Option(nil)
		if !guard {
			name, opts = "guard off", []redlock.Option{redlock.WithoutRestartGuard()}
		}
		t.Run(name, func(t *testing.T) {
			srvs := startNodes(t, 5)
			cuts := []*testserver.Proxy{testserver.StartProxy(t, srvs[3].Addr()), testserver.StartProxy(t, srvs[4].Addr())}
			addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr(), cuts[0].Addr(), cuts[1].Addr()}
			key := t.Name()
			m1 := distlock.New(newBackend(t, addrs, opts...), distlock.WithTTL(2*time.Second), distlock.WithoutAutoRefresh()).Mutex(key)
			for range 2 { // counters in step everywhere
				l, err := m1.TryLock(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Unlock(context.Background())
			}
			for _, c := range cuts {
				c.Cut()
			}
			first, err := m1.TryLock(context.Background())
			if err != nil {
				t.Fatalf("first holder on {0, 1, 2}: %v", err)
			}
			srvs[2].Kill(t)
			time.Sleep(redlock.TokenGrain) // see TestRestartWithoutPersistence
			srvs[2].Restart(t)
			for _, c := range cuts {
				c.Restore()
			}
			// Short leases for the second client: an attempt decided by quick
			// refusals can leave a late grant behind until its TTL ends. (Not
			// too short: its node timeout is a quarter of it.)
			second := distlock.New(newBackend(t, addrs, opts...), distlock.WithTTL(time.Second)).Mutex(key)
			if !guard {
				l, err := second.TryLock(context.Background())
				if err != nil {
					t.Fatalf("second client, guard off: %v; want the known unsafety: {2, 3, 4} granted", err)
				}
				defer l.Unlock(context.Background())
				if !time.Now().Before(first.ValidUntil()) {
					t.Fatalf("the first lease ended before the second grant: the overlap was not shown")
				}
				t.Logf("guard off: two holders, tokens %d and %d", first.Token(), l.Token())
				if l.Token() <= first.Token() {
					t.Errorf("second token %d is not above the first %d", l.Token(), first.Token())
				}
				return
			}
			for time.Now().Before(first.ValidUntil()) {
				if l, err := second.TryLock(context.Background()); err == nil {
					// An attempt begun while the first lease was valid may
					// win once it has ended, without master 2.
					overlap := time.Now().Before(first.ValidUntil())
					on2, _ := srvs[2].Do(t, "GET", lockKey(key))
					_ = l.Unlock(context.Background())
					if overlap || leased(on2) {
						t.Fatalf("a second holder (token %d; master 2 granted: %v) while the first (token %d) was valid: %v",
							l.Token(), leased(on2), first.Token(), overlap)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l, err := second.Lock(ctx)
			if err != nil {
				t.Fatalf("second client after the first lease ended: %v", err)
			}
			defer l.Unlock(context.Background())
			if l.Token() <= first.Token() {
				t.Errorf("second token %d is not above the first %d", l.Token(), first.Token())
			}
		})
	}
}

// TestInspectWarnings: Inspect names the masters whose eviction policy or
// missing persistence puts locks at risk, and those where the restart
// guard holds the key back.
func TestInspectWarnings(t *testing.T) {
	srvs := []*testserver.Redis{
		testserver.StartRedis(t, testserver.WithPersistence()),
		testserver.StartRedis(t, testserver.WithPersistence(), testserver.WithArgs("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")),
		testserver.StartRedis(t, testserver.WithPersistence(), testserver.AsRestarted()),
	}
	b := newBackend(t, addrsOf(srvs))
	info, err := b.Inspect(context.Background(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Warnings) != 2 ||
		!strings.HasPrefix(info.Warnings[0], srvs[1].Addr()+": maxmemory-policy allkeys-lru") ||
		!strings.HasPrefix(info.Warnings[1], srvs[2].Addr()+": restart guard") {
		t.Errorf("warnings %q; want node 1's eviction policy, then the guard on node 2", info.Warnings)
	}
}

// TestURLGuardOptions: max_ttl and restart_guard in a redlock:// URL.
func TestURLGuardOptions(t *testing.T) {
	srvs := startNodes(t, 3)
	base := "redlock://" + strings.Join(addrsOf(srvs), ",")
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
		c, err := distlock.Open(ctx, base+tt.query, distlock.WithTTL(tt.ttl))
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
	for _, bad := range []string{"?max_ttl=0s", "?restart_guard=maybe"} {
		if c, err := distlock.Open(ctx, base+bad); !errors.Is(err, distlock.ErrInvalidURL) {
			if c != nil {
				c.Close()
			}
			t.Errorf("Open(%q): %v; want ErrInvalidURL", bad, err)
		}
	}
}

// TestGuardedVote: when the restart guard holds new grants back on too
// many masters for a quorum, the vote is the guard's, not a holder's:
// TryLock says so (distlock.ErrRestartGuard) and how long until enough
// masters grant, and it is not retried as a split vote. With the guard on
// one master of three, the other two grant.
func TestGuardedVote(t *testing.T) {
	fresh := testserver.StartRedis(t)
	restarted := []*testserver.Redis{testserver.StartRedis(t, testserver.AsRestarted()), testserver.StartRedis(t, testserver.AsRestarted())}
	ctx := context.Background()
	const maxTTL = time.Minute
	b := newBackend(t, []string{restarted[0].Addr(), fresh.Addr(), restarted[1].Addr()}, redlock.WithMaxTTL(maxTTL))
	g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: t.Name(), Owner: "o"}, TTL: 10 * time.Second})
	if err != nil || g.Acquired || !g.Guarded || g.RetryAfter <= 0 || g.RetryAfter > 2*maxTTL {
		t.Fatalf("Acquire with 2 of 3 masters guarded: %+v, %v; want Guarded, RetryAfter about %v", g, err, maxTTL)
	}
	_, err = distlock.New(b).Mutex(t.Name()).TryLock(ctx)
	if !errors.Is(err, distlock.ErrRestartGuard) {
		t.Errorf("TryLock with 2 of 3 masters guarded: %v; want ErrRestartGuard", err)
	}
	// The give-back to a master the vote did not wait for may still be on
	// its way.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, _ := fresh.Do(t, "GET", lockKey(t.Name())); !leased(v) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fresh master kept the grant of a guarded vote")
		}
	}

	one := newBackend(t, []string{restarted[0].Addr(), fresh.Addr(), testserver.StartRedis(t).Addr()}, redlock.WithMaxTTL(maxTTL))
	if g, err := one.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: t.Name() + "/one", Owner: "o"}, TTL: 10 * time.Second}); err != nil || !g.Acquired {
		t.Errorf("Acquire with 1 of 3 masters guarded: %+v, %v; want granted", g, err)
	}
}
