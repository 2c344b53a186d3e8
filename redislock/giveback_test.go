package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestLateGiveBackKeepsRetry: with WithReplicas, a grant the replica did
// not confirm is given back, and the Lock call tries again with the same
// owner. Here the give-back is held up in the network past its deadline,
// the retry is granted, and only then does the give-back reach the master.
// It must not delete the retry's grant: the lock stays held, and another
// client is refused.
func TestLateGiveBackKeepsRetry(t *testing.T) {
	master := testserver.StartRedis(t)
	replica := testserver.StartReplica(t, master)
	proxy := testserver.StartProxy(t, master.Addr())
	rdb := redistest.Client(t, proxy.Addr(), func(o *redis.Options) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
	})
	c := distlock.New(newBackend(t, rdb, redislock.WithReplicas(1, 200*time.Millisecond)), distlock.WithTTL(time.Minute))
	key := t.Name()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	replica.Pause(t) // the first grant goes unconfirmed
	resumed := false
	defer func() {
		if !resumed {
			replica.Resume(t)
		}
	}()
	// Only a release names the release channel.
	held, deliver := proxy.HoldRequest(redistest.Keys(redislock.DefaultPrefix, key).Channel)
	type result struct {
		l   *distlock.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Mutex(key).Lock(ctx)
		done <- result{l, err}
	}()
	select {
	case <-held:
	case r := <-done:
		t.Fatalf("Lock returned before giving a grant back: %v, %v", r.l, r.err)
	case <-ctx.Done():
		t.Fatal("no give-back was sent")
	}
	replica.Resume(t)
	resumed = true
	r := <-done
	if r.err != nil {
		t.Fatalf("Lock after the replica came back: %v", r.err)
	}
	defer r.l.Unlock(context.Background())

	deliver() // the first give-back reaches the master at last
	time.Sleep(100 * time.Millisecond)

	other := distlock.New(newBackend(t, newClient(t, master.Addr()))).Mutex(key)
	if l, err := other.TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("TryLock by another client while the lock is held: %v; want ErrNotObtained (the late give-back deleted the retry's grant)", err)
	}
	if err := r.l.Err(); err != nil {
		t.Errorf("the holder's lock: %v", err)
	}
}

// TestLateGiveBackKeepsReentrantRetry is TestLateGiveBackKeepsRetry for a
// re-entrant mutex: the late give-back of a hold must not end the hold
// that the retry took, whether the retry made a new lease or joined one
// that another hold of the same identity kept alive (the same token).
func TestLateGiveBackKeepsReentrantRetry(t *testing.T) {
	for _, beside := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "beside another hold"}[beside], func(t *testing.T) {
			master := testserver.StartRedis(t)
			replica := testserver.StartReplica(t, master)
			proxy := testserver.StartProxy(t, master.Addr())
			rdb := redistest.Client(t, proxy.Addr(), func(o *redis.Options) {
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
			})
			id := distlock.NewOwnerID()
			c := distlock.New(newBackend(t, rdb, redislock.WithReplicas(1, 200*time.Millisecond)), distlock.WithTTL(time.Minute))
			key := t.Name()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if beside {
				direct := distlock.New(newBackend(t, newClient(t, master.Addr())), distlock.WithTTL(time.Minute))
				other, err := direct.Mutex(key, distlock.WithOwner(id)).TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Unlock(context.Background())
			}

			replica.Pause(t) // the first grant goes unconfirmed
			resumed := false
			defer func() {
				if !resumed {
					replica.Resume(t)
				}
			}()
			held, deliver := proxy.HoldRequest(redistest.Keys(redislock.DefaultPrefix, key).Channel)
			type result struct {
				l   *distlock.Lock
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := c.Mutex(key, distlock.WithOwner(id)).Lock(ctx)
				done <- result{l, err}
			}()
			select {
			case <-held:
			case r := <-done:
				t.Fatalf("Lock returned before giving a hold back: %v, %v", r.l, r.err)
			case <-ctx.Done():
				t.Fatal("no give-back was sent")
			}
			replica.Resume(t)
			resumed = true
			r := <-done
			if r.err != nil {
				t.Fatalf("Lock after the replica came back: %v", r.err)
			}
			defer r.l.Unlock(context.Background())

			deliver() // the first give-back reaches the master at last
			time.Sleep(100 * time.Millisecond)

			if err := r.l.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh of the retry's hold after the late give-back: %v; want it still held", err)
			}
			other := distlock.New(newBackend(t, newClient(t, master.Addr()))).Mutex(key)
			if l, err := other.TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
				if l != nil {
					_ = l.Unlock(ctx)
				}
				t.Errorf("TryLock by another client while the lock is held: %v; want ErrNotObtained", err)
			}
		})
	}
}
