package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestRefreshOtherTTL: a Refresh with a TTL of other whole seconds moves
// the key to another lease. The handle's loss follows the key: the end of
// the lease it left is no loss, the end of the lease it is on is one,
// told at once (by Grant.Lost), not at ValidUntil.
func TestRefreshOtherTTL(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	const ttl, longer = 2 * time.Second, 6 * time.Second
	// lock takes a lock of TTL ttl, refreshes it to longer, and returns
	// it with the leases its key was on before and after.
	lock := func(t *testing.T) (l *distlock.Lock, before, after clientv3.LeaseID) {
		ctx := timeout(t, 30*time.Second)
		key := uniqueKey("refresh-ttl")
		// No watchdog: only Grant.Lost can end the handle before its
		// ValidUntil.
		l, err := distlock.New(newBackend(t, c), distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex(key).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		leaseOf := func() clientv3.LeaseID {
			resp, err := admin.Get(ctx, lockPrefix(key), clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the lock's keys: %+v, %v; want one", resp, err)
			}
			return clientv3.LeaseID(resp.Kvs[0].Lease)
		}
		before = leaseOf()
		if err := l.Refresh(ctx, longer); err != nil {
			t.Fatalf("Refresh(%v): %v", longer, err)
		}
		return l, before, leaseOf()
	}
	revoke := func(t *testing.T, id clientv3.LeaseID) {
		if _, err := admin.Revoke(timeout(t, 10*time.Second), id); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
	}

	t.Run("left lease ends", func(t *testing.T) {
		t.Parallel()
		l, before, after := lock(t)
		if before == after {
			t.Skip("the key stayed on its lease")
		}
		revoke(t, before)
		// The keep-alive of the 2s lease, every 667ms, finds it gone.
		time.Sleep(2 * time.Second)
		if err := l.Err(); err != nil {
			t.Errorf("the lease the key left ended, and the handle ended: %v", err)
		}
		_ = l.Unlock(timeout(t, 5*time.Second))
	})
	t.Run("lease ends", func(t *testing.T) {
		t.Parallel()
		l, _, after := lock(t)
		revoke(t, after)
		revoked := time.Now()
		// The keep-alive of the 6s lease, every 2s, finds it gone.
		select {
		case <-l.Done():
		case <-time.After(3 * time.Second):
			t.Fatalf("the lease of the key ended, and the handle did not notice in 3s (ValidUntil in %v)", time.Until(l.ValidUntil()).Round(time.Millisecond))
		}
		if !errors.Is(l.Err(), distlock.ErrLockLost) || errors.Is(l.Err(), distlock.ErrLockExpired) {
			t.Errorf("handle ended %v after its lease was revoked with %v; want ErrLockLost, told, not expired", time.Since(revoked).Round(time.Millisecond), l.Err())
		}
	})
}

// TestRefreshShorter: a Refresh with a shorter TTL than the lock's
// shortens the holding: its Done closes by the new TTL, and a holder that
// then stops renewing loses its key at that TTL too (not the longer one
// asked for before), no earlier than its Done closes.
func TestRefreshShorter(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	cl := distlock.New(newBackend(t, c))
	ctx := timeout(t, time.Minute)
	key := uniqueKey("refresh-shorter")
	const long, short = 30 * time.Second, 2 * time.Second
	l, err := cl.Mutex(key, distlock.WithTTL(long), distlock.WithoutAutoRefresh()).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	start := time.Now()
	if err := l.Refresh(ctx, short); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if left := time.Until(l.ValidUntil()); left > short {
		t.Errorf("after Refresh(%v), the handle is valid for %v more", short, left)
	}
	var done, gone time.Duration
	for done == 0 || gone == 0 {
		if time.Since(start) > long/2 {
			t.Fatalf("%v after Refresh(%v): Done closed after %v, key gone after %v (0: not yet); want both by the short TTL", time.Since(start), short, done, gone)
		}
		select {
		case <-l.Done():
			if done == 0 {
				done = time.Since(start)
			}
		default:
		}
		resp, err := admin.Get(ctx, lockPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if resp.Count == 0 && gone == 0 {
			gone = time.Since(start)
			if done == 0 {
				select {
				case <-l.Done():
					done = gone // closed meanwhile: not later than the key went
				default:
					t.Fatalf("the key ended %v after Refresh(%v), and the handle's Done is still open", gone, short)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
