package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// use is one way of using a key: a kind, a semaphore's size, or a
// re-entrant mutex.
type use struct {
	name    string
	kind    driver.Kind
	limit   int
	reentry bool
}

var uses = []use{
	{name: "mutex", kind: driver.Exclusive},
	{name: "reentrant", kind: driver.Exclusive, reentry: true},
	{name: "writer", kind: driver.Write},
	{name: "reader", kind: driver.Read},
	{name: "permit2", kind: driver.Permit, limit: 2},
	{name: "permit5", kind: driver.Permit, limit: 5},
}

func (u use) request(key, owner string, queue time.Duration) driver.Request {
	r := driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: u.kind}, TTL: 30 * time.Second, Limit: u.limit, Queue: queue}
	if u.reentry {
		r.Reentry = "identity-of-" + owner
	}
	return r
}

// children lists key's line with a connection of its own.
func children(t *testing.T, addrs []string, key string) []string {
	t.Helper()
	admin := dial(t, addrs, sessionTimeout)
	_, _ = admin.Sync(zklock.LinePath(zklock.DefaultRoot, key))
	names, _, err := admin.Children(zklock.LinePath(zklock.DefaultRoot, key))
	if err != nil {
		t.Fatalf("listing %s: %v", key, err)
	}
	return names
}

// testKindMismatch: while a key is held one way, a request of another
// family, or for a semaphore of another size, is refused with a
// *driver.KindError naming both, whether it would wait or not, and
// leaves no node in the line; once the key is free, it is granted.
func testKindMismatch(t *testing.T, addrs []string) {
	holder, asker := newBackend(t, addrs, sessionTimeout), newBackend(t, addrs, sessionTimeout)
	for _, held := range uses {
		for _, asked := range uses {
			if driver.Compatible(held.kind, held.limit, asked.kind, asked.limit) {
				continue
			}
			t.Run(held.name+"-"+asked.name, func(t *testing.T) {
				key := "kinds-" + held.name + "-" + asked.name
				ctx := ctxFor(t, 20*time.Second)
				g, err := holder.Acquire(ctx, held.request(key, "holder", 0))
				if err != nil || !g.Acquired {
					t.Fatalf("Acquire of the free key as a %s: %+v, %v", held.name, g, err)
				}
				for _, queue := range []time.Duration{0, 10 * time.Second} {
					g, err := asker.Acquire(ctx, asked.request(key, fmt.Sprint("asker", queue), queue))
					var ke *driver.KindError
					if !errors.As(err, &ke) || !errors.Is(err, driver.ErrKindMismatch) {
						t.Fatalf("Acquire as a %s (queue %v) while held as a %s: %+v, %v; want a *driver.KindError", asked.name, queue, held.name, g, err)
					}
					want := driver.KindError{Key: key, Held: held.kind.Family(), Asked: asked.kind, AskedLimit: asked.limit}
					if held.kind == driver.Permit {
						want.HeldLimit = held.limit
					}
					if *ke != want {
						t.Errorf("KindError %+v; want %+v", *ke, want)
					}
					if names := children(t, addrs, key); len(names) != 1 {
						t.Errorf("the line after the refusal: %v; want the holder's node alone", names)
					}
				}
				info, err := asker.Inspect(ctx, key)
				if err != nil || !info.Held || info.Kind != held.kind || info.Limit != held.limit {
					t.Errorf("Inspect: %+v, %v; want held as a %s, limit %d", info, err, held.name, held.limit)
				}
				if err := holder.Release(ctx, driver.Lease{Key: key, Owner: "holder", Kind: held.kind}); err != nil {
					t.Fatalf("Release: %v", err)
				}
				if g, err := asker.Acquire(ctx, asked.request(key, "asker", 0)); err != nil || !g.Acquired {
					t.Errorf("Acquire as a %s once the key is free: %+v, %v", asked.name, g, err)
				}
				_ = asker.Release(ctx, driver.Lease{Key: key, Owner: "asker", Kind: asked.kind})
			})
		}
	}
}

// testKindRace: requests of two families for a free key, made at once
// from two sessions, are never both granted: the node made first wins,
// and the other sees it and is refused.
func testKindRace(t *testing.T, addrs []string) {
	a, b := newBackend(t, addrs, sessionTimeout), newBackend(t, addrs, sessionTimeout)
	pairs := [][2]use{{uses[0], uses[4]}, {uses[2], uses[0]}, {uses[3], uses[4]}, {uses[4], uses[5]}, {uses[1], uses[3]}}
	for round := range 60 {
		p := pairs[round%len(pairs)]
		key := fmt.Sprintf("kind-race-%d", round)
		ctx := ctxFor(t, 20*time.Second)
		var wg sync.WaitGroup
		grants := make([]driver.Grant, 2)
		errs := make([]error, 2)
		for i, be := range []*zklock.Backend{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				grants[i], errs[i] = be.Acquire(ctx, p[i].request(key, fmt.Sprint("racer", i), 0))
			}()
		}
		wg.Wait()
		if grants[0].Acquired && grants[1].Acquired {
			t.Fatalf("round %d: a %s and a %s both granted on one key", round, p[0].name, p[1].name)
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, driver.ErrKindMismatch) {
				t.Errorf("round %d: %s: %v", round, p[i].name, err)
			}
			if grants[i].Acquired {
				_ = []*zklock.Backend{a, b}[i].Release(context.Background(), driver.Lease{Key: key, Owner: fmt.Sprint("racer", i), Kind: p[i].kind})
			}
		}
	}
}

// testKindAfterReleaseElsewhere: a request of another kind made just
// after a release on another server of the ensemble is not refused for
// the released holding: the server it asks may not have applied the
// release yet, and a mismatch, final for the caller, is confirmed after a
// sync.
func testKindAfterReleaseElsewhere(t *testing.T, e *testserver.Ensemble) {
	leader, follower := e.Leader(t), e.Follower(t)
	holder, asker := newBackend(t, []string{leader.Addr()}, sessionTimeout), newBackend(t, []string{follower.Addr()}, sessionTimeout)
	ctx := ctxFor(t, 2*time.Minute)
	for round := range 200 {
		key := fmt.Sprintf("kind-after-release-%d", round)
		held, asked := uses[4+round%2], uses[round%4]
		g, err := holder.Acquire(ctx, held.request(key, "holder", 0))
		if err != nil || !g.Acquired {
			t.Fatalf("round %d: Acquire as a %s: %+v, %v", round, held.name, g, err)
		}
		if err := holder.Release(ctx, driver.Lease{Key: key, Owner: "holder", Kind: held.kind}); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		g, err = asker.Acquire(ctx, asked.request(key, "asker", 0))
		if err != nil || !g.Acquired {
			t.Fatalf("round %d: Acquire as a %s once the %s was released: %+v, %v; want granted", round, asked.name, held.name, g, err)
		}
		_ = asker.Release(ctx, driver.Lease{Key: key, Owner: "asker", Kind: asked.kind})
	}
}
