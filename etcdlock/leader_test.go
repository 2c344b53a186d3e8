package etcdlock_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestLeaderKilledShortTTL: the leader dies while a lock of 2s is held
// and another client waits. A new leader is elected well within the TTL,
// so the holder's renewals must get through to it: a renewal sent before
// the election must not hang until the lease is gone. The waiter is
// granted soon after the release, not after a request of its own that
// hung through the election.
func TestLeaderKilledShortTTL(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	ctx := timeout(t, 2*time.Minute)
	for round := range 2 {
		key := uniqueKey("leader-short")
		opts := []distlock.Option{distlock.WithTTL(2 * time.Second), distlock.WithFairness()}
		a := distlock.New(newBackend(t, c), opts...).Mutex(key)
		b := distlock.New(newBackend(t, c), opts...).Mutex(key)
		la, err := a.Lock(ctx)
		if err != nil {
			t.Fatalf("round %d: Lock: %v", round, err)
		}
		got := make(chan *distlock.Lock, 1)
		go func() {
			l, err := b.Lock(ctx)
			if err != nil {
				t.Errorf("round %d: waiting Lock: %v", round, err)
			}
			got <- l
		}()
		time.Sleep(300 * time.Millisecond) // b waits in line
		leader := c.Leader(t)
		leader.Kill()
		time.Sleep(5 * time.Second) // past two TTLs: renewals went on through the election
		if err := la.Err(); err != nil {
			t.Fatalf("round %d: the holder of a 2s lock lost it when the leader died: %v", round, err)
		}
		select {
		case <-got:
			t.Fatalf("round %d: the waiter got the lock while it was held", round)
		default:
		}
		if err := la.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		released := time.Now()
		select {
		case lb := <-got:
			if lb == nil {
				t.FailNow()
			}
			if lb.Token() <= la.Token() {
				t.Errorf("round %d: token after the election %d, not above the one before %d", round, lb.Token(), la.Token())
			}
			_ = lb.Unlock(ctx)
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: waiter not granted 15s after the release", round)
		}
		if wait := time.Since(released); wait > 3*time.Second {
			t.Errorf("round %d: the waiter was granted %v after the release", round, wait)
		}
		leader.Restart()
	}
}
