package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestStateReclaimed: keys locked and released in every way (a mutex, a
// fair waiter that gives up, a writer and readers, permits, re-entrant
// holds, a holder whose process ends without releasing) leave no etcd
// key behind within a bounded time, and tokens still grow across the
// reclaimed state.
func TestStateReclaimed(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	b := newBackend(t, c)
	ctx := timeout(t, time.Minute)
	prefix := uniqueKey("reclaim") + ":"
	const ttl = 2 * time.Second
	tokens := make(map[string]uint64)
	take := func(b *etcdlock.Backend, req driver.Request) {
		t.Helper()
		g, err := b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire %+v: %+v, %v", req, g, err)
		}
		if g.Token <= tokens[req.Key] {
			t.Errorf("%s: token %d, not above the last one %d", req.Key, g.Token, tokens[req.Key])
		}
		tokens[req.Key] = g.Token
	}
	give := func(l driver.Lease) {
		t.Helper()
		if err := b.Release(ctx, l); err != nil {
			t.Fatalf("Release %+v: %v", l, err)
		}
	}
	round := func() {
		for _, s := range shapes {
			key := prefix + s.name
			req := s.request(key, uniqueKey("o"), ttl)
			take(b, req)
			if s.kind == driver.Exclusive && s.reentry == "" {
				// A fair waiter in line, which gives up.
				w := req
				w.Owner, w.Fair, w.Queue = uniqueKey("w"), true, ttl
				if g, err := b.Acquire(ctx, w); err != nil || g.Acquired {
					t.Fatalf("fair Acquire of a held key: %+v, %v; want a place in line", g, err)
				}
				if err := b.Release(ctx, w.Lease); err != nil && !errors.Is(err, driver.ErrNotHeld) {
					t.Fatalf("Release of a place in line: %v", err)
				}
			}
			if s.reentry != "" {
				nested := req
				nested.Owner = uniqueKey("n")
				if g, err := b.Acquire(ctx, nested); err != nil || !g.Acquired || g.Token != tokens[key] {
					t.Fatalf("nested Acquire: %+v, %v; want granted with token %d", g, err, tokens[key])
				}
				give(nested.Lease)
			}
			give(req.Lease)
		}
		// A holder whose process ends holding: its lease ends the key.
		crashed := etcdlock.New(c.Client(t))
		take(crashed, shapes[0].request(prefix+"crashed", uniqueKey("c"), ttl))
		_ = crashed.Close()
	}
	round()
	waitEmpty := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			left := stored(t, admin, prefix)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("20s after the last release, %d etcd keys are left: %q", len(left), left)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitEmpty()
	round() // tokens still grow
	waitEmpty()
}
