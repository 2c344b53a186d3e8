package zklock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// reclaimWithin bounds how long the test servers take to delete a key's
// nodes once nobody holds or waits for it: two container checks (see
// testserver.ZooKeeperContainerCheck), and time to spare for a busy
// machine.
const reclaimWithin = 4*testserver.ZooKeeperContainerCheck + 20*time.Second

// testStateReclaimed: a key that was held, waited for and refused, of
// every kind, whose holder stopped renewing it, or whose holder's session
// ended, leaves no znode behind once nobody holds or waits for it; and its
// last token stays readable just after its release.
func testStateReclaimed(t *testing.T, addrs []string) {
	admin := dial(t, addrs, sessionTimeout)
	b, other := newBackend(t, addrs, sessionTimeout), newBackend(t, addrs, sessionTimeout)
	ctx := ctxFor(t, 2*time.Minute)
	for _, u := range uses {
		key := "reclaim-" + u.name
		g, err := b.Acquire(ctx, u.request(key, "holder", 0))
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire as a %s: %+v, %v", u.name, g, err)
		}
		var others []driver.Lease
		// Fill the semaphore; last is the newest holding's token.
		last := g.Token
		for i := range u.limit - 1 {
			l := driver.Lease{Key: key, Owner: fmt.Sprint("permit", i), Kind: u.kind}
			g, err := other.Acquire(ctx, u.request(key, l.Owner, 0))
			if err != nil || !g.Acquired {
				t.Fatalf("Acquire of permit %d: %+v, %v", i, g, err)
			}
			others, last = append(others, l), max(last, g.Token)
		}
		rival := u
		if u.kind == driver.Read {
			rival = uses[2] // a writer: readers would share the key
		}
		// A waiter that keeps its place, then a refused attempt.
		for _, queue := range []time.Duration{10 * time.Second, 0} {
			if g, err := other.Acquire(ctx, rival.request(key, "rival", queue)); err != nil || g.Acquired {
				t.Fatalf("Acquire as a %s while held: %+v, %v; want refused", rival.name, g, err)
			}
		}
		_ = other.Release(ctx, driver.Lease{Key: key, Owner: "rival", Kind: rival.kind})
		for _, l := range others {
			if err := other.Release(ctx, l); err != nil {
				t.Fatalf("Release of %s: %v", l.Owner, err)
			}
		}
		if err := b.Release(ctx, driver.Lease{Key: key, Owner: "holder", Kind: u.kind}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if info, err := b.Inspect(ctx, key); err != nil || info.Held || info.Token != last {
			t.Errorf("Inspect after the release of the %s: %+v, %v; want free, with the last token %d", u.name, info, err, last)
		}
	}
	// A holder that stops renewing, and a re-entrant one, whose sessions
	// live on.
	for _, u := range uses[:2] {
		r := u.request("reclaim-lapsed-"+u.name, "holder", 0)
		r.TTL = time.Second
		if g, err := b.Acquire(ctx, r); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
	}
	// One more key, whose holder's session ends instead of releasing it.
	conn := dial(t, addrs, sessionTimeout)
	if g, err := zklock.New(conn, sessionTimeout).Acquire(ctx, uses[0].request("reclaim-closed", "holder", 0)); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	conn.Close()
	var left []string
	for deadline := time.Now().Add(reclaimWithin); ; {
		if left = stored(t, admin, "reclaim-"); len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%d znodes left %v after every key was given up: %v", len(left), reclaimWithin, left)
	}
}
