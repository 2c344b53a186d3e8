package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestKindsExclude: while a key is held as one family of lock, a request
// of another family, or for a semaphore of another size, is refused with
// a *driver.KindError naming both, and leaves nothing behind (no place in
// a fair queue, no writer's claim); a request of the same family is
// refused or granted as usual. Each variant of a family is tried: plain,
// fair and re-entrant mutexes, writers and readers, waiting or not.
func TestKindsExclude(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	b := newBackend(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type variant struct {
		name  string
		kind  driver.Kind
		limit int
		fair  bool
		reent string
	}
	variants := []variant{
		{"mutex", driver.Exclusive, 0, false, ""},
		{"fair mutex", driver.Exclusive, 0, true, ""},
		{"re-entrant mutex", driver.Exclusive, 0, false, "id"},
		{"writer", driver.Write, 0, false, ""},
		{"reader", driver.Read, 0, false, ""},
		{"semaphore of 3", driver.Permit, 3, false, ""},
		{"semaphore of 5", driver.Permit, 5, false, ""},
	}
	req := func(key, owner string, v variant, queue time.Duration) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: v.kind}, TTL: time.Minute,
			Limit: v.limit, Fair: v.fair, Reentry: v.reent, Queue: queue}
	}
	for i, held := range variants {
		for j, asked := range variants {
			for _, queue := range []time.Duration{0, 10 * time.Second} {
				key := fmt.Sprintf("%s:%d-%d-%v", t.Name(), i, j, queue > 0)
				g, err := b.Acquire(ctx, req(key, "holder", held, 0))
				if err != nil || !g.Acquired {
					t.Fatalf("%s: %+v, %v", held.name, g, err)
				}
				g, err = b.Acquire(ctx, req(key, "asker", asked, queue))
				same := driver.Compatible(held.kind, held.limit, asked.kind, asked.limit)
				var ke *driver.KindError
				switch {
				case same && err != nil:
					t.Errorf("%s asked while a %s holds: %v; want no error", asked.name, held.name, err)
				case !same && !errors.As(err, &ke):
					t.Errorf("%s asked while a %s holds: %+v, %v; want a *driver.KindError", asked.name, held.name, g, err)
				case !same:
					want := driver.KindError{Key: key, Held: held.kind.Family(), HeldLimit: held.limit, Asked: asked.kind, AskedLimit: asked.limit}
					if *ke != want || !errors.Is(err, driver.ErrKindMismatch) {
						t.Errorf("%s asked while a %s holds: %#v; want %#v", asked.name, held.name, *ke, want)
					}
					k := redistest.Keys(redislock.DefaultPrefix, key)
					if n := rdb.Exists(ctx, k.Queue, k.Writing).Val(); n != 0 {
						t.Errorf("%s asked while a %s holds (queue %v): the refusal left a place or a claim", asked.name, held.name, queue)
					}
				}
				info, err := b.Inspect(ctx, key)
				if err != nil || !info.Held || info.Kind.Family() != held.kind.Family() || info.Limit != held.limit {
					t.Errorf("Inspect while a %s holds: %+v, %v; want held as %v, limit %d", held.name, info, err, held.kind, held.limit)
				}
			}
		}
	}
}

// TestKindFreedWithItsHoldings: a key's family lasts while a holding of
// it lives, no longer: once the last permit is given back (or has
// lapsed), the key may be taken as another family, or as a semaphore of
// another size.
func TestKindFreedWithItsHoldings(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := t.Name()
	permit := func(owner string, n int, ttl time.Duration) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: driver.Permit}, TTL: ttl, Limit: n}
	}
	mutex := driver.Request{Lease: driver.Lease{Key: key, Owner: "m"}, TTL: time.Minute}
	for _, r := range []driver.Request{permit("a", 3, time.Minute), permit("b", 3, 100*time.Millisecond)} {
		if g, err := b.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("%+v: %+v, %v", r, g, err)
		}
	}
	if err := b.Release(ctx, permit("a", 3, 0).Lease); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // b's permit lapses
	if g, err := b.Acquire(ctx, permit("c", 5, time.Minute)); err != nil || !g.Acquired {
		t.Fatalf("a semaphore of 5 once the permits of 3 ended: %+v, %v; want granted", g, err)
	}
	if err := b.Release(ctx, permit("c", 5, 0).Lease); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, mutex); err != nil || !g.Acquired {
		t.Fatalf("a mutex once the permits ended: %+v, %v; want granted", g, err)
	}
}
