package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/redlock"
)

// fakeClock is the real clock plus an offset that jumps forward when a
// node, through jumpHook, runs a script: to the backend, the operation
// took as long as the jump.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// jumpHook moves clock forward by the armed amount on the next script its
// client runs, once.
type jumpHook struct {
	clock *fakeClock
	armed atomic.Int64
}

func (h *jumpHook) arm(d time.Duration) { h.armed.Store(int64(d)) }

func (*jumpHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*jumpHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *jumpHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			h.clock.offset.Add(h.armed.Swap(0))
		}
		return err
	}
}

// TestValidity: a lease is valid for TTL - elapsed - drift, elapsed being
// measured from the start of the attempt. Grant.ValidFor is TTL - drift
// from that start, whatever the attempt took, and an attempt that used up
// the whole budget fails and leaves nothing behind.
func TestValidity(t *testing.T) {
	srvs := startNodes(t, 3)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	const ttl = 10 * time.Second
	drift := driver.DefaultDrift(ttl) // 1% + 2ms = 102ms
	budget := ttl - drift

	clock := &fakeClock{}
	clients := newClients(t, addrs)
	hook := &jumpHook{clock: clock} // one jump, by the first reply that comes
	for _, c := range clients {
		c.AddHook(hook)
	}
	b := redlock.New(clients, redlock.WithClock(clock.now))
	t.Cleanup(func() { b.Close() })

	acquire := func(key string) (driver.Grant, error) {
		return b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "owner-" + key}, TTL: ttl})
	}
	g, err := acquire("quick")
	if err != nil || !g.Acquired || g.ValidFor != budget {
		t.Errorf("quick acquire: %+v, %v; want ValidFor = TTL - drift = %v", g, err, budget)
	}

	// The nodes answer after most of the budget: still valid, for the rest
	// of it (the caller counts ValidFor from the start).
	hook.arm(budget - time.Second)
	g, err = acquire("slow")
	if err != nil || !g.Acquired || g.ValidFor != budget {
		t.Errorf("acquire that took TTL-drift-1s: %+v, %v; want granted with ValidFor %v", g, err, budget)
	}

	// The nodes answer after the whole budget: the lease is worthless.
	hook.arm(budget)
	g, err = acquire("late")
	if !errors.Is(err, redlock.ErrValidityExpired) || g.Acquired {
		t.Fatalf("acquire that took TTL-drift: %+v, %v; want ErrValidityExpired", g, err)
	}
	for i, v := range onNodes(t, srvs, "GET", lockKey("late")) {
		if leased(v) {
			t.Errorf("node %d kept the lock of an attempt that ran out of validity", i)
		}
	}

	// Refresh: the same budget, counted from the refresh's start.
	hook.arm(budget)
	if _, err := b.Refresh(ctx, driver.Lease{Key: "quick", Owner: "owner-quick"}, ttl); !errors.Is(err, redlock.ErrValidityExpired) {
		t.Errorf("refresh that took TTL-drift: %v; want ErrValidityExpired", err)
	}
	hook.arm(budget - time.Second)
	if v, err := b.Refresh(ctx, driver.Lease{Key: "quick", Owner: "owner-quick"}, ttl); err != nil || v != budget {
		t.Errorf("refresh that took TTL-drift-1s: %v, %v; want %v", v, err, budget)
	}

	// The drift allowance is configurable.
	own := newBackend(t, addrs, redlock.WithDrift(func(ttl time.Duration) time.Duration { return ttl / 4 }))
	g, err = own.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "drift", Owner: "o"}, TTL: ttl})
	if err != nil || g.ValidFor != ttl-ttl/4 {
		t.Errorf("WithDrift(ttl/4): %+v, %v; want ValidFor %v", g, err, ttl-ttl/4)
	}

	// Through distlock: the handle's deadline is the attempt's start plus
	// TTL - drift.
	before := time.Now()
	l, err := distlock.New(newBackend(t, addrs), distlock.WithTTL(ttl)).Mutex("handle").TryLock(ctx)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if u := l.ValidUntil(); u.Before(before.Add(budget)) || u.After(after.Add(budget)) {
		t.Errorf("ValidUntil is %v after TryLock began, which took %v; want TTL - drift = %v after its start",
			u.Sub(before), after.Sub(before), budget)
	}
}
