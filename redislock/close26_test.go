package redislock_test

import (
	"context"
	"errors"
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

// TestRepeatAfterAnotherCycleIsLost: a lock keeps one release receipt, the
// last release's. A release sent again after its reply was lost reports the
// release it made while that receipt is still its own, even while another
// holder has the lock; once another holder has taken the lock and released
// it, the repeat reports the lock lost.
func TestRepeatAfterAnotherCycleIsLost(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := t.Name()
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	cycle := func(owner string) {
		t.Helper()
		if g, err := b.Acquire(ctx, req(owner)); err != nil || !g.Acquired {
			t.Fatalf("Acquire(%s) = %+v, %v", owner, g, err)
		}
		if err := b.Release(ctx, req(owner).Lease); err != nil {
			t.Fatalf("Release(%s): %v", owner, err)
		}
	}
	cycle("a")
	if err := b.Release(ctx, req("a").Lease); err != nil {
		t.Fatalf("repeat of a's release right after it: %v; want nil (its receipt)", err)
	}
	// While the next holder holds the lock, the receipt is still a's.
	if g, err := b.Acquire(ctx, req("b")); err != nil || !g.Acquired {
		t.Fatalf("Acquire(b) = %+v, %v", g, err)
	}
	if err := b.Release(ctx, req("a").Lease); err != nil {
		t.Fatalf("repeat of a's release while b holds the lock: %v; want nil (its receipt)", err)
	}
	if err := b.Release(ctx, req("b").Lease); err != nil {
		t.Fatalf("Release(b): %v", err)
	}
	if err := b.Release(ctx, req("a").Lease); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("repeat of a's release after b's full cycle: %v; want ErrNotHeld", err)
	}
	if err := b.Release(ctx, req("b").Lease); err != nil {
		t.Fatalf("repeat of b's release: %v; want nil (its receipt)", err)
	}
}

// TestClusterPrefixWithBrace: a prefix whose brace would move the keys'
// hash tag, so that a lock's keys and its restart-guard marker fall in
// different slots, fails every call with an error that names the prefix;
// a prefix with a whole tag of its own (every lock in its slot) works.
func TestClusterPrefixWithBrace(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	cl := startCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, prefix := range []string{"app{", "app{x:", "app{}:", "{}"} {
		_, err := distlock.New(newBackend(t, rdb, redislock.WithPrefix(prefix))).Mutex("k").TryLock(ctx)
		if !errors.Is(err, distlock.ErrInvalidBackend) || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("WithPrefix(%q) on Cluster: TryLock error %v; want ErrInvalidBackend naming the prefix", prefix, err)
		}
	}
	for _, prefix := range []string{"{app}:", "app}:", "a{b}c:"} {
		b := newBackend(t, rdb, redislock.WithPrefix(prefix))
		if err := b.DeclareFresh(ctx); err != nil {
			t.Fatalf("WithPrefix(%q): DeclareFresh: %v", prefix, err)
		}
		l, err := distlock.New(b).Mutex("k").TryLock(ctx)
		if err != nil {
			t.Fatalf("WithPrefix(%q) on Cluster: TryLock: %v", prefix, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("WithPrefix(%q) on Cluster: Unlock: %v", prefix, err)
		}
	}
}

// TestGuardWithoutInfo: the restart guard reads INFO inside its scripts.
// A user whose ACL forbids INFO gets an error wrapping ErrInvalidBackend
// that says so, on every attempt: an attempt that failed on INFO must not
// leave the key looking known, which would let the next attempt past the
// guard on a server that may have lost its data.
func TestGuardWithoutInfo(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.AsRestarted())
	if _, err := srv.Do(t, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t, srv.Addr(), func(o *redis.Options) { o.Username, o.Password = "noinfo", "pw" })
	c := distlock.New(newBackend(t, rdb), distlock.WithTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		l, err := c.Mutex("k").TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			t.Fatalf("attempt %d: granted on a server the guard cannot read; want an error", i+1)
		}
		if !errors.Is(err, distlock.ErrInvalidBackend) || !strings.Contains(err.Error(), "INFO") {
			t.Errorf("attempt %d: %v; want ErrInvalidBackend naming INFO", i+1, err)
		}
	}
	// With the guard off, the same user takes locks.
	c2 := distlock.New(newBackend(t, rdb, redislock.WithoutRestartGuard()), distlock.WithTTL(time.Second))
	l, err := c2.Mutex("k2").TryLock(ctx)
	if err != nil {
		t.Fatalf("without the restart guard: %v", err)
	}
	_ = l.Unlock(ctx)
}
