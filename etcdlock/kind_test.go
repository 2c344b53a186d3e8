package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// shape is one way of using a key: a kind, a semaphore's size, a
// re-entrant identity.
type shape struct {
	name    string
	kind    driver.Kind
	limit   int
	reentry string
}

var shapes = []shape{
	{"mutex", driver.Exclusive, 0, ""},
	{"re-entrant mutex", driver.Exclusive, 0, "identity"},
	{"writer", driver.Write, 0, ""},
	{"reader", driver.Read, 0, ""},
	{"permit of 2", driver.Permit, 2, ""},
	{"permit of 5", driver.Permit, 5, ""},
}

func (s shape) request(key, owner string, ttl time.Duration) driver.Request {
	return driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: s.kind}, TTL: ttl, Limit: s.limit, Reentry: s.reentry}
}

// TestKindsExclude: while a key is held one way, a request of another
// family, or for a semaphore of another size, is refused with a
// *driver.KindError naming both, takes nothing, and leaves nothing in
// the store; a request of the same family is not a KindError.
func TestKindsExclude(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	b1, b2 := newBackend(t, c), newBackend(t, c)
	ctx := timeout(t, 2*time.Minute)
	for _, held := range shapes {
		for _, asked := range shapes {
			t.Run(held.name+"/"+asked.name, func(t *testing.T) {
				key := uniqueKey("kinds")
				h := held.request(key, uniqueKey("holder"), 10*time.Second)
				if g, err := b1.Acquire(ctx, h); err != nil || !g.Acquired {
					t.Fatalf("Acquire as %s: %+v, %v", held.name, g, err)
				}
				before := stored(t, admin, key)
				a := asked.request(key, uniqueKey("asker"), 10*time.Second)
				if asked.reentry == held.reentry && asked.reentry != "" {
					a.Reentry = "another identity"
				}
				g, err := b2.Acquire(ctx, a)
				var kerr *driver.KindError
				mismatch := !driver.Compatible(held.kind, held.limit, asked.kind, asked.limit)
				switch {
				case mismatch && (g.Acquired || !errors.As(err, &kerr) || !errors.Is(err, driver.ErrKindMismatch)):
					t.Fatalf("Acquire as %s of a key held as %s: %+v, %v; want a *driver.KindError", asked.name, held.name, g, err)
				case mismatch:
					want := driver.KindError{Key: key, Held: held.kind.Family(), HeldLimit: held.limit, Asked: asked.kind, AskedLimit: asked.limit}
					if *kerr != want {
						t.Errorf("KindError %+v; want %+v", *kerr, want)
					}
					if after := stored(t, admin, key); fmt.Sprint(after) != fmt.Sprint(before) {
						t.Errorf("a refused request changed the store: %q, then %q", before, after)
					}
				case err != nil:
					t.Fatalf("Acquire as %s of a key held as %s: %v; want no error", asked.name, held.name, err)
				}
				if g.Acquired {
					if err := b2.Release(ctx, a.Lease); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
				if err := b1.Release(ctx, h.Lease); err != nil {
					t.Errorf("Release: %v", err)
				}
			})
		}
	}
}

// TestKindsExcludeAtOnce: requests of two families for a free key, sent
// at once from two clients, are never both granted.
func TestKindsExcludeAtOnce(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b1, b2 := newBackend(t, c), newBackend(t, c)
	ctx := timeout(t, 2*time.Minute)
	pairs := [][2]shape{{shapes[0], shapes[4]}, {shapes[0], shapes[2]}, {shapes[3], shapes[4]}, {shapes[4], shapes[5]}, {shapes[1], shapes[3]}}
	for _, pair := range pairs {
		t.Run(pair[0].name+"/"+pair[1].name, func(t *testing.T) {
			both := 0
			for range 20 {
				key := uniqueKey("at-once")
				reqs := [2]driver.Request{pair[0].request(key, uniqueKey("a"), 10*time.Second), pair[1].request(key, uniqueKey("b"), 10*time.Second)}
				var grants [2]driver.Grant
				var errs [2]error
				var wg sync.WaitGroup
				for i, b := range []*etcdlock.Backend{b1, b2} {
					wg.Go(func() { grants[i], errs[i] = b.Acquire(ctx, reqs[i]) })
				}
				wg.Wait()
				if grants[0].Acquired && grants[1].Acquired {
					both++
				}
				for i, b := range []*etcdlock.Backend{b1, b2} {
					if errs[i] != nil && !errors.Is(errs[i], driver.ErrKindMismatch) {
						t.Fatalf("Acquire as %s: %v", pair[i].name, errs[i])
					}
					if grants[i].Acquired {
						if err := b.Release(context.WithoutCancel(ctx), reqs[i].Lease); err != nil {
							t.Errorf("Release: %v", err)
						}
					}
				}
			}
			if both > 0 {
				t.Errorf("%d of 20 times, a %s and a %s were both granted on one key", both, pair[0].name, pair[1].name)
			}
		})
	}
}

// TestInspectLimit: Inspect tells a semaphore's size.
func TestInspectLimit(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := newBackend(t, c)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("limit")
	req := shapes[5].request(key, uniqueKey("p"), 10*time.Second)
	if g, err := b.Acquire(ctx, req); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || !info.Held || info.Kind != driver.Permit || info.Limit != 5 {
		t.Errorf("Inspect of a semaphore of 5: %+v, %v; want held, a permit, Limit 5", info, err)
	}
}
