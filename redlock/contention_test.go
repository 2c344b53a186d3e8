package redlock_test

import (
	"context"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// slowNodes gives nodes time to answer on a busy machine: these tests are
// about which nodes are asked and who is woken, not about timeouts.
var slowNodes = redlock.WithNodeTimeout(2 * time.Second)

// hold takes key for owner on the nodes listed, directly with the acquire
// script, as another client's attempt in flight would have.
func hold(t *testing.T, cs []redis.UniversalClient, key, owner string, nodes ...int) {
	t.Helper()
	k := redisnode.KeysFor(redlock.DefaultPrefix, key)
	for _, i := range nodes {
		token, _, err := redisnode.Acquire(context.Background(), cs[i], k, owner, 10*time.Second, "")
		if err != nil || token == 0 {
			t.Fatalf("node %d: token %d, %v", i, token, err)
		}
	}
}

// woken reports whether w fires within d.
func woken(w driver.Watch, d time.Duration) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(d):
		return false
	}
}

// A contender that wins a minority of the nodes (a split vote) gives them
// back without waking anybody, since it freed nothing a waiter could take.
// When the vote keeps splitting, round after round, it is told to try again
// after a short random pause rather than after the other contenders'
// leases.
func TestSplitVoteQuiet(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	be := newBackend(t, addrs, slowNodes)
	const key = "split"
	hold(t, cs, key, "x", 0, 1)
	hold(t, cs, key, "z", 3, 4)

	ctx := context.Background()
	w, err := newBackend(t, addrs, slowNodes).Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	g, err := be.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "y"}, TTL: 10 * time.Second})
	if err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	if g.RetryAfter <= 0 || g.RetryAfter > time.Second {
		t.Errorf("RetryAfter = %v after a split vote; want a short pause, not the holders' 10s leases", g.RetryAfter)
	}
	// The give-back to a node the attempt did not wait for may still be
	// on its way.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := redisnode.Inspect(ctx, cs[2], redisnode.KeysFor(redlock.DefaultPrefix, key))
		if err == nil && !st.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 after the failed attempt: %+v, %v; want its grant given back", st, err)
		}
	}
	if woken(w, 200*time.Millisecond) {
		t.Error("a split vote's release woke a waiter")
	}
}

// TestLateGrantGivenBack: the outcome of a split vote is decided before
// one node's request has reached it (the network holds it back). When it
// arrives the node grants it, and the give-back must come after that grant,
// not overtake it: a give-back that runs first finds nothing to delete, and
// the late grant then holds the node for the whole lease.
func TestLateGrantGivenBack(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	ctx := context.Background()
	// The held request must be the script itself, not a NOSCRIPT retry.
	if err := redisnode.LoadScripts(ctx, cs[2]); err != nil {
		t.Fatal(err)
	}
	proxy := testserver.StartProxy(t, addrs[2])
	via := slices.Clone(addrs)
	via[2] = proxy.Addr()
	be := newBackend(t, via, slowNodes)
	const key = "late"
	hold(t, cs, key, "x", 0, 1)
	hold(t, cs, key, "z", 3, 4)

	held, deliver := proxy.HoldRequest(lockKey(key))
	g, err := be.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "y"}, TTL: 10 * time.Second})
	if err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	select {
	case <-held:
	case <-time.After(2 * time.Second):
		t.Fatal("node 2's request was not held: the fault was not injected")
	}
	// Whatever else the attempt sent node 2 has had time to arrive.
	time.Sleep(100 * time.Millisecond)
	deliver()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := redisnode.Inspect(ctx, cs[2], redisnode.KeysFor(redlock.DefaultPrefix, key))
		if err == nil && !st.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 after its late grant: %+v, %v; want the grant given back", st, err)
		}
	}
}

// gateOf is the gate node of key among n nodes, as the backend picks it.
func gateOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// A release reported by every node wakes a waiter once, not once per node:
// the nodes' messages name the same lease. The gate node's report is the
// exception: it wakes too, even when another node's came first.
func TestWatchFiresOncePerRelease(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	waiter := newBackend(t, addrs, slowNodes)
	ctx := context.Background()
	const key = "once"
	w, err := waiter.Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch := redisnode.KeysFor(redlock.DefaultPrefix, key).Channel
	gate := gateOf(key, len(cs))
	for i, c := range cs {
		// The release of the lease with token 42, as each node reports it,
		// one after the other.
		if err := c.Publish(ctx, ch, "42").Err(); err != nil {
			t.Fatal(err)
		}
		want := i == 0 || i == gate
		if got := woken(w, 300*time.Millisecond); got != want {
			t.Fatalf("node %d's report of the release (gate %d): woken %v, want %v", i, gate, got, want)
		}
	}
	// The next release wakes it again.
	if err := cs[3].Publish(ctx, ch, "43").Err(); err != nil {
		t.Fatal(err)
	}
	if !woken(w, 2*time.Second) {
		t.Error("the next release did not wake the waiter")
	}
}

// A waiter woken by a release asks the key's gate node first, alone, and
// the other nodes only if the gate grants it: a refusal there costs the
// others nothing.
func TestWokenWaiterAsksGateFirst(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	holder, waiter := newBackend(t, addrs, slowNodes), newBackend(t, addrs, slowNodes)
	ctx := context.Background()
	const key = "gated"
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	if g, err := holder.Acquire(ctx, req("h1")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	w, err := waiter.Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// As a waiter does, it tries once after the watch is in place: the
	// leases that refuse it then announce their release.
	if g, err := waiter.Acquire(ctx, req("w0")); err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	if err := holder.Release(ctx, req("h1").Lease); err != nil {
		t.Fatal(err)
	}
	if !woken(w, 2*time.Second) {
		t.Fatal("the release did not wake the waiter")
	}
	// Another contender was quicker.
	if g, err := holder.Acquire(ctx, req("h2")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}

	gate := gateOf(key, len(addrs))
	before := make([]int64, len(cs))
	for i, c := range cs {
		before[i] = commandStats(t, []redis.UniversalClient{c})["evalsha"]
	}
	g, err := waiter.Acquire(ctx, req("w"))
	if err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused", g, err)
	}
	for i, c := range cs {
		n := commandStats(t, []redis.UniversalClient{c})["evalsha"] - before[i]
		switch {
		case i == gate && n != 1:
			t.Errorf("gate node %d ran %d scripts; want 1", i, n)
		case i != gate && n != 0:
			t.Errorf("node %d ran %d scripts for a waiter the gate refused; want 0", i, n)
		}
	}
}

// The releases of a lease run on every node at once, so a waiter woken by
// the first node's report may ask the gate before the release has reached
// it, and be refused by the very lease that is going away. The gate's own
// report, which comes after the release ran there, must wake it again;
// otherwise it sleeps until the released lease would have expired
// (LockWakesPromptly failed this way, rarely, on a loaded machine).
func TestGateReportWakesWaiterRefusedTooEarly(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	holder, waiter := newBackend(t, addrs, slowNodes), newBackend(t, addrs, slowNodes)
	ctx := context.Background()
	const key = "early"
	req := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 10 * time.Second}
	}
	if g, err := holder.Acquire(ctx, req("h1")); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	w, err := waiter.Watch(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	k := redisnode.KeysFor(redlock.DefaultPrefix, key)
	gate := gateOf(key, len(cs))
	other := (gate + 1) % len(cs)
	// The release runs on another node first and is reported there.
	st, err := redisnode.Inspect(ctx, cs[gate], k)
	if err != nil || !st.Held {
		t.Fatalf("gate node: %+v, %v", st, err)
	}
	if so, err := redisnode.Inspect(ctx, cs[other], k); err != nil || so.Token != st.Token {
		t.Fatalf("node %d: %+v, %v; want the gate's token %d (the grant writes the largest back)", other, so, err, st.Token)
	}
	// The waiter was refused there before (a release announces itself
	// only where someone was refused).
	if tok, _, err := redisnode.Acquire(ctx, cs[other], k, "w0", 10*time.Second, ""); err != nil || tok != 0 {
		t.Fatalf("acquire on node %d: %v, %v; want refused", other, tok, err)
	}
	if ok, err := redisnode.ReleaseWaking(ctx, cs[other], k, "h1", redisnode.WakeToken); err != nil || !ok {
		t.Fatalf("release on node %d: %v, %v", other, ok, err)
	}
	if !woken(w, 2*time.Second) {
		t.Fatal("the first report of the release did not wake the waiter")
	}
	// The woken waiter asks the gate, where the lease is still there.
	g, err := waiter.Acquire(ctx, req("w"))
	if err != nil || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want refused by the gate", g, err)
	}
	// Now the release reaches the gate, which reports it with the same
	// token as the first node.
	if ok, err := redisnode.ReleaseWaking(ctx, cs[gate], k, "h1", redisnode.WakeToken); err != nil || !ok {
		t.Fatalf("release on the gate node %d: %v, %v", gate, ok, err)
	}
	if !woken(w, 2*time.Second) {
		t.Fatalf("the gate's report of the release did not wake the waiter it refused (RetryAfter was %v)", g.RetryAfter)
	}
}
