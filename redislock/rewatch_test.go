package redislock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// countingBackend counts the attempts of the waiter it serves that were
// refused by a lease with more than early left, and runs refused, if set,
// after its first refused attempt has returned from the server and before
// the waiter sees the refusal.
type countingBackend struct {
	*redislock.Backend
	early    time.Duration
	attempts atomic.Int32
	refusals atomic.Int32 // with more than early left
	refused  func()
}

func (b *countingBackend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := b.Backend.Acquire(ctx, req)
	n := b.attempts.Add(1)
	if err == nil && !g.Acquired {
		if g.RetryAfter > b.early {
			b.refusals.Add(1)
		}
		if n == 1 && b.refused != nil {
			b.refused()
		}
	}
	return g, err
}

// watchedWaits runs wait for a plain and for a fair mutex, on a fresh key,
// with a backend whose client already watches the key (probe, the
// subscription, is live).
func watchedWaits(t *testing.T, early time.Duration, wait func(t *testing.T, ctx context.Context, srv *testserver.Redis, b *countingBackend, probe driver.Watch, opts ...distlock.Option)) {
	srv := testserver.StartRedis(t)
	for _, fair := range []bool{false, true} {
		name, opts := "plain", []distlock.Option(nil)
		if fair {
			name, opts = "fair", []distlock.Option{distlock.WithFairness()}
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := &countingBackend{Backend: newBackend(t, newClient(t, srv.Addr())), early: early}
			probe, err := b.Watch(ctx, t.Name(), "")
			if err != nil {
				t.Fatal(err)
			}
			defer probe.Close()
			wait(t, ctx, srv, b, probe, opts...)
		})
	}
}

// TestNoRetryWhenWatchLive: a waiter whose client already watches the
// key's releases (another waiter's or a recent wait's subscription is
// live) sleeps after its first refused attempt, without trying again at
// once: no release can have gone unheard. The holder here never releases;
// its lease runs out, and the waiter tries again after the lease's
// remaining time (again a little later if it woke in the lease's last
// millisecond: the server reports whole milliseconds). So of its refused
// attempts, one saw most of the lease left, not two.
func TestNoRetryWhenWatchLive(t *testing.T) {
	const lease = 4 * time.Second
	watchedWaits(t, lease/4, func(t *testing.T, ctx context.Context, srv *testserver.Redis, b *countingBackend, _ driver.Watch, opts ...distlock.Option) {
		holderC := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(lease), distlock.WithoutAutoRefresh())
		if _, err := holderC.Mutex(t.Name(), opts...).TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		// A safety poll longer than the test: the waiter wakes by the
		// holder's remaining lease, or by a release.
		waiter := distlock.New(b, distlock.WithTTL(time.Minute), distlock.WithSafetyPoll(time.Minute))
		l, err := waiter.Mutex(t.Name(), opts...).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		if n := b.refusals.Load(); n != 1 {
			t.Errorf("%d of the waiter's %d attempts were refused with more than %v of the lease left; want 1 (then it slept until the lease ran out)", n, b.attempts.Load(), b.early)
		}
	})
}

// TestReleaseBeforeWatchNotMissed: a release that comes between a
// waiter's refused attempt and its watch is not missed, though the key's
// subscription was live all along: the waiter learns that the channel
// heard something since its attempt, and tries again at once, instead of
// sleeping until the safety poll (here longer than the test).
func TestReleaseBeforeWatchNotMissed(t *testing.T) {
	watchedWaits(t, 0, func(t *testing.T, ctx context.Context, srv *testserver.Redis, b *countingBackend, probe driver.Watch, opts ...distlock.Option) {
		holderC := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(time.Minute))
		holder, err := holderC.Mutex(t.Name(), opts...).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released := false
		b.refused = func() {
			// The release comes, and its message reaches the waiter's
			// client, before the waiter watches.
			if err := holder.Unlock(ctx); err != nil {
				t.Errorf("holder's Unlock: %v", err)
				return
			}
			select {
			case <-probe.C():
				released = true
			case <-ctx.Done():
				t.Error("the release's message did not come")
			}
		}
		waiter := distlock.New(b, distlock.WithTTL(time.Minute), distlock.WithSafetyPoll(time.Minute))
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		l, err := waiter.Mutex(t.Name(), opts...).Lock(wctx)
		if err != nil {
			t.Fatalf("the waiter missed the release (released before its watch: %v): %v", released, err)
		}
		defer l.Unlock(context.Background())
		if !released {
			t.Fatal("the release was not injected between the attempt and the watch")
		}
	})
}
