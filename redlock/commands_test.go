package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// commands returns how many commands the nodes have run in all.
func commands(t testing.TB, srvs []*testserver.Redis) int {
	t.Helper()
	n := 0
	for _, s := range srvs {
		n += s.Commands(t)
	}
	return n
}

// TestCommandsPerAcquireRelease: an uncontended acquire and release of a
// lock used before runs at most 7 commands on each node, scripts
// included: the acquire script, its read, the clock and the lease; the
// release script, its read and the free record. The lease keeps its token
// (the grant writes no fencing counter), since it lasts past the next step
// of the 100ms clock floor.
func TestCommandsPerAcquireRelease(t *testing.T) {
	srvs := startNodes(t, 5)
	b := newBackend(t, addrsOf(srvs))
	ctx := context.Background()
	req := driver.Request{Lease: driver.Lease{Key: t.Name(), Owner: "o"}, TTL: 10 * time.Second}
	cycle := func() uint64 {
		t.Helper()
		g, err := b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if err := b.Release(ctx, req.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return g.Token
	}
	last := cycle() // the first grant of a key takes the slow path
	// A cycle whose nodes' clocks straddle a step of the floor, seldom,
	// needs a write-back: the median cycle counts.
	per := make([]int, 15)
	for i := range per {
		before := commands(t, srvs)
		if token := cycle(); token <= last {
			t.Fatalf("token %d after %d; want it higher", token, last)
		} else {
			last = token
		}
		per[i] = commands(t, srvs) - before
	}
	slices.Sort(per)
	if n := per[len(per)/2]; n > 7*len(srvs) {
		t.Errorf("%d commands on %d nodes per acquire+release (median); want at most 7 per node", n, len(srvs))
	}
}

// TestShortLeaseWritesCounter: a lease that could end before the clock
// floor passes its token (here 1ms long, shorter than any wait for the
// next step of the floor) leaves the token in the fencing counter too, so
// that a grant after it vanished is still higher.
func TestShortLeaseWritesCounter(t *testing.T) {
	srvs := startNodes(t, 3)
	// No drift allowance, and a node timeout of its own (the default is a
	// quarter of the TTL): the nodes grant the 1ms lease.
	noDrift := redlock.WithDrift(func(time.Duration) time.Duration { return 0 })
	b := newBackend(t, addrsOf(srvs), noDrift, redlock.WithNodeTimeout(5*time.Second))
	ctx := context.Background()
	key := t.Name()
	long := driver.Request{Lease: driver.Lease{Key: key, Owner: "long"}, TTL: 10 * time.Second}
	g, err := b.Acquire(ctx, long)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if err := b.Release(ctx, long.Lease); err != nil {
		t.Fatal(err)
	}
	onNodes(t, srvs, "DEL", fenceKey(key)) // the free record alone keeps the token
	// Granted on every node, the 1ms lease is valid or not by the time the
	// replies are in: the nodes have issued its token either way.
	short := driver.Request{Lease: driver.Lease{Key: key, Owner: "short"}, TTL: time.Millisecond}
	_, _ = b.Acquire(ctx, short)
	for i, v := range onNodes(t, srvs, "GET", fenceKey(key)) {
		if n, _ := strconv.ParseUint(v, 10, 64); n <= g.Token {
			t.Errorf("node %d: counter %q after a 1ms lease granted after token %d; want it above", i, v, g.Token)
		}
	}
}

// TestRefreshKeepsLeaseForAGrain: a renewal to a TTL shorter than the
// token grain leaves the lease on the nodes for a grain and 2ms, so that
// the lease still keeps its token until the clock floor has passed it;
// the validity counts the TTL asked for.
func TestRefreshKeepsLeaseForAGrain(t *testing.T) {
	srvs := startNodes(t, 3)
	b := newBackend(t, addrsOf(srvs))
	ctx := context.Background()
	req := driver.Request{Lease: driver.Lease{Key: t.Name(), Owner: "o"}, TTL: 10 * time.Second}
	if g, err := b.Acquire(ctx, req); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	const ttl = 3 * time.Millisecond
	// The validity of so short a renewal may run out on a loaded machine:
	// the nodes have applied it either way.
	_, _ = b.Refresh(ctx, req.Lease, ttl)
	for i, v := range onNodes(t, srvs, "PTTL", lockKey(req.Key)) {
		if ms, _ := strconv.Atoi(v); ms <= int(ttl.Milliseconds()) { // -2: gone
			t.Errorf("node %d: PTTL %s after a renewal to %v; want the lease kept past a token grain", i, v, ttl)
		}
	}
}
