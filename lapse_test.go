package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

// TestUnlockAtKeepsTheKeyUntilThen: the handle ends, the key stays held
// until the given time and is free after it, with no release.
func TestUnlockAtKeepsTheKeyUntilThen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(30*time.Second))
	l, err := c.Mutex("tick").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Second)
	if err := l.UnlockAt(ctx, until); err != nil {
		t.Fatalf("UnlockAt: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done still open after UnlockAt")
	}
	if !errors.Is(l.Err(), distlock.ErrLockReleased) {
		t.Errorf("Err after UnlockAt: %v; want ErrLockReleased", l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockReleased) {
		t.Errorf("Unlock after UnlockAt: %v; want ErrLockReleased", err)
	}
	info, err := c.Inspect(ctx, "tick")
	if err != nil || info.TTL > time.Second || (!info.Held && time.Now().Before(until)) {
		t.Errorf("Inspect after UnlockAt: %+v, %v; want held until the lapse, for at most 1s", info, err)
	}
	if time.Now().Before(until) {
		if l2, err := c.Mutex("tick").TryLock(ctx); err == nil {
			if time.Now().Before(until) {
				t.Error("TryLock before the lapse was granted")
			}
			_ = l2.Unlock(ctx)
		}
	}
	// Free after the lapse: a waiter gets it soon after until.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := c.Mutex("tick").Lock(wctx)
	if err != nil {
		t.Fatalf("Lock after the lapse: %v", err)
	}
	if time.Now().Before(until) {
		t.Errorf("granted %v before the lapse", time.Until(until))
	}
	_ = l2.Unlock(ctx)
}

// TestUnlockAtInThePastUnlocks, and on a lost lease reports the loss.
func TestUnlockAtEdges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store)
	l, err := c.Mutex("past").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UnlockAt(ctx, time.Now().Add(-time.Minute)); err != nil {
		t.Fatalf("UnlockAt in the past: %v", err)
	}
	if info, _ := c.Inspect(ctx, "past"); info.Held {
		t.Error("UnlockAt in the past left the key held; want it released")
	}

	l, err = c.Mutex("broken").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store.Expire("broken")
	if err := l.UnlockAt(ctx, time.Now().Add(time.Minute)); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("UnlockAt of a lost lease: %v; want ErrLockLost", err)
	}
	//lint:ignore SA1012 testing that a nil context is rejected
	if err := l.UnlockAt(nil, time.Now()); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("UnlockAt(nil): %v; want ErrInvalidArgument", err)
	}
}

// TestUnlockAtStopsTheWatchdog: the watchdog renews nothing after UnlockAt,
// so a short lapse is not extended to the TTL by a renewal in flight.
func TestUnlockAtStopsTheWatchdog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(2*time.Second), distlock.WithRefreshInterval(20*time.Millisecond))
	l, err := c.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several watchdog renewals
	if err := l.UnlockAt(ctx, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if info, err := c.Inspect(ctx, "busy"); err != nil || info.Held {
		t.Errorf("1s after a 300ms lapse: %+v, %v; want free", info, err)
	}
}
