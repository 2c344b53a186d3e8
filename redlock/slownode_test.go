package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// delayHook holds back the scripts its client sends, for delay each, before
// they are sent, as a busy machine or a slow link would: only those match
// picks (all when match is nil), and only while armed. The wait ends early,
// with the context's error and nothing sent, if the context ends first.
type delayHook struct {
	delay time.Duration
	match func(args []any) bool
	armed atomic.Bool
	held  atomic.Int32 // scripts held back so far
}

func (*delayHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*delayHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *delayHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		n := cmd.Name()
		if !h.armed.Load() || (n != "evalsha" && n != "eval") || (h.match != nil && !h.match(cmd.Args())) {
			return next(ctx, cmd)
		}
		h.held.Add(1)
		t := time.NewTimer(h.delay)
		defer t.Stop()
		select {
		case <-t.C:
			return next(ctx, cmd)
		case <-ctx.Done():
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
	}
}

// delayed returns clients of addrs, those of the nodes listed with h.
func delayed(t *testing.T, addrs []string, h *delayHook, nodes ...int) []redis.UniversalClient {
	t.Helper()
	cs := newClients(t, addrs)
	for _, i := range nodes {
		if err := redisnode.LoadScripts(context.Background(), cs[i]); err != nil {
			t.Fatal(err)
		}
		cs[i].AddHook(h)
	}
	return cs
}

func TestDefaultNodeTimeout(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		20 * time.Millisecond:  5 * time.Millisecond,
		300 * time.Millisecond: 75 * time.Millisecond,
		time.Second:            250 * time.Millisecond,
		5 * time.Second:        time.Second,
		distlock.DefaultTTL:    time.Second,
		time.Hour:              time.Second,
	} {
		got := redlock.DefaultNodeTimeout(ttl)
		if got != want {
			t.Errorf("DefaultNodeTimeout(%v) = %v, want %v", ttl, got, want)
		}
		// An acquisition waits at most one timeout for the vote and one
		// for the write-back: about half the lease is left.
		if drift := driver.DefaultDrift(ttl); ttl-drift-2*got < ttl/3 {
			t.Errorf("DefaultNodeTimeout(%v) = %v leaves too little of the lease", ttl, got)
		}
	}
}

// TestSlowNodesDefaultTimeout: masters that answer in 150ms, as on a
// loaded machine, still grant and release a lock with the default TTL and
// the default node timeout.
func TestSlowNodesDefaultTimeout(t *testing.T) {
	addrs := addrsOf(startNodes(t, 3))
	h := &delayHook{delay: 150 * time.Millisecond}
	b := redlock.New(delayed(t, addrs, h, 0, 1, 2))
	t.Cleanup(func() { b.Close() })
	h.armed.Store(true)
	ctx := context.Background()
	c := distlock.New(b, distlock.WithoutAutoRefresh())
	l, err := c.Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with masters 150ms slow, default TTL: %v", err)
	}
	if err := l.Refresh(ctx, distlock.DefaultTTL); err != nil {
		t.Errorf("Refresh with masters 150ms slow: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock with masters 150ms slow: %v", err)
	}
}

// stallable starts n masters with a proxy in front of node stalled, and
// returns the servers, the proxy, and the addresses clients should use.
func stallable(t *testing.T, n, stalled int) ([]*testserver.Redis, *testserver.Proxy, []string) {
	t.Helper()
	srvs := startNodes(t, n)
	proxy := testserver.StartProxy(t, srvs[stalled].Addr())
	via := addrsOf(srvs)
	via[stalled] = proxy.Addr()
	return srvs, proxy, via
}

// holders returns the nodes that hold key.
func holders(t *testing.T, srvs []*testserver.Redis, key string) []int {
	t.Helper()
	var held []int
	for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
		if leased(v) {
			held = append(held, i)
		}
	}
	return held
}

// TestUnlockWaitsForStalledNode: a node that stalls for a few hundred
// milliseconds during Unlock (its link holds every byte, then the
// connection resumes) must still have the lock released: a release given
// up after a short timeout closes the connection, the request is lost
// with it, and the node keeps the key for its whole TTL.
func TestUnlockWaitsForStalledNode(t *testing.T) {
	srvs, proxy, via := stallable(t, 5, 2)
	ctx := context.Background()
	c := distlock.New(newBackend(t, via), distlock.WithTTL(time.Minute))
	key := t.Name()
	l, err := c.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held := holders(t, srvs, key); len(held) != 5 {
		t.Fatalf("nodes %v hold the lock; want all 5", held)
	}
	proxy.Blackhole()
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		time.Sleep(300 * time.Millisecond)
		proxy.Restore()
	}()
	err = l.Unlock(ctx)
	<-restored
	if err != nil {
		t.Errorf("Unlock across a 300ms stall of one node: %v", err)
	}
	// Whatever the Unlock sent has had time to land.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		held := holders(t, srvs, key)
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v still hold the lock 2s after Unlock; want none", held)
		}
	}
}

// TestReleaseReportsUnknownNodes: a release reports success only once every
// node's outcome is known. While one node is silent past the context's
// deadline the release fails, naming it; repeated once the node answers,
// it succeeds and leaves no node holding the lock.
func TestReleaseReportsUnknownNodes(t *testing.T) {
	srvs, proxy, via := stallable(t, 5, 3)
	b := newBackend(t, via)
	ctx := context.Background()
	key := t.Name()
	lease := driver.Lease{Key: key, Owner: "o"}
	if g, err := b.Acquire(ctx, driver.Request{Lease: lease, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	proxy.Blackhole()
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b.Release(rctx, lease)
	cancel()
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Op != "release" || qe.Succeeded() != 4 || qe.Nodes[3].Outcome != redlock.Failed {
		t.Fatalf("Release with node 3 silent: %v; want a release *QuorumError: 4 released, node 3 failed", err)
	}
	if !strings.Contains(err.Error(), via[3]) {
		t.Errorf("error does not name the silent node %s: %v", via[3], err)
	}
	t.Logf("error: %v", err)
	proxy.Restore()
	if err := b.Release(ctx, lease); err != nil {
		t.Errorf("Release repeated after the node came back: %v", err)
	}
	if held := holders(t, srvs, key); len(held) != 0 {
		t.Errorf("nodes %v hold the lock after the repeated release; want none", held)
	}
}

// TestReleaseToleratesDeadNodes: a node that cannot be reached at all
// (nothing listens) does not hold the release up: the outcome of every
// node that could be reached is known.
func TestReleaseToleratesDeadNodes(t *testing.T) {
	srvs := startNodes(t, 5)
	c := distlock.New(newBackend(t, addrsOf(srvs)))
	ctx := context.Background()
	l, err := c.Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srvs[0].Kill(t)
	srvs[4].Kill(t)
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock with 2 of 5 dead: %v", err)
	}
}

// isRefresh picks the renewal script of redisnode.Refresh: two keys, the
// second the re-entrant holds.
func isRefresh(args []any) bool {
	return len(args) > 4 && fmt.Sprint(args[2]) == "2" && strings.HasSuffix(fmt.Sprint(args[4]), ":holds")
}

// TestRefreshReachesEveryMaster: a renewal returns once a quorum extended
// the lease, and the caller then ends its context, before the requests to
// the slower masters have gone out. They must still go out: every master's
// expiry follows every renewal.
func TestRefreshReachesEveryMaster(t *testing.T) {
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	// Masters 3 and 4 get each renewal 20ms after the others.
	h := &delayHook{delay: 20 * time.Millisecond, match: isRefresh}
	b := redlock.New(delayed(t, addrs, h, 3, 4))
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	key := t.Name()
	const base, step = 10 * time.Second, 500 * time.Millisecond
	l, err := distlock.New(b, distlock.WithTTL(base), distlock.WithoutAutoRefresh()).Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	h.armed.Store(true)
	for i := 1; i <= 60; i++ {
		// Each renewal asks for a step more than the last, so that a
		// master that missed one is a step behind.
		ttl := base + time.Duration(i)*step
		start := time.Now()
		if err := l.Refresh(ctx, ttl); err != nil {
			t.Fatalf("Refresh %d: %v", i, err)
		}
		// A request still on its way may land a little later.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var behind []string
			for j, v := range onNodes(t, srvs, "PTTL", lockKey(key)) {
				var ms int64
				fmt.Sscan(v, &ms)
				// Measured after the read: since the renewal started, the
				// expiry of a master that took it has fallen by less.
				if left := time.Duration(ms)*time.Millisecond + time.Since(start); left < ttl-step/2 {
					behind = append(behind, fmt.Sprintf("master %d (%v left)", j, time.Duration(ms)*time.Millisecond))
				}
			}
			if len(behind) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after Refresh %d to %v: %v kept an older expiry", i, ttl, behind)
			}
		}
	}
	if h.held.Load() < 60 {
		t.Fatalf("%d renewals held back; the fault was not injected", h.held.Load())
	}
}

// TestDeclareFreshWaitsForSlowMaster: DeclareFresh waits for every master
// as long as its context allows.
func TestDeclareFreshWaitsForSlowMaster(t *testing.T) {
	addrs := addrsOf(startNodes(t, 3))
	h := &delayHook{delay: 200 * time.Millisecond}
	b := redlock.New(delayed(t, addrs, h, 1))
	t.Cleanup(func() { b.Close() })
	h.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.DeclareFresh(ctx); err != nil {
		t.Errorf("DeclareFresh with one master 200ms slow and 10s allowed: %v", err)
	}
	if h.held.Load() == 0 {
		t.Fatal("no script held back; the fault was not injected")
	}
}

// isAcquire picks the acquire script of redisnode.Acquire: three keys,
// the lock, its fencing counter and the restart guard's marker.
func isAcquire(args []any) bool {
	return len(args) > 5 && fmt.Sprint(args[2]) == "3" && strings.HasSuffix(fmt.Sprint(args[4]), ":fence")
}

// kindHook makes its client's acquisitions fail with a *driver.KindError,
// as a node whose key is held as another kind of lock answers.
type kindHook struct{}

func (kindHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (kindHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (kindHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && isAcquire(cmd.Args()) {
			err := &driver.KindError{Key: "on the node", Held: driver.Permit, HeldLimit: 3, Asked: driver.Exclusive}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestKindRefusals: a node that refuses a request for the key's kind
// counts as a refusal, never as a grant: a quorum of them is a
// *driver.KindError, a minority leaves the vote to the other nodes.
func TestKindRefusals(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	ctx := context.Background()
	for _, tc := range []struct {
		refusing []int
		want     string
	}{
		{[]int{0, 2, 4}, "kind"},
		{[]int{1, 3}, "granted"},
	} {
		t.Run(fmt.Sprint(tc.refusing), func(t *testing.T) {
			cs := newClients(t, addrs)
			for _, i := range tc.refusing {
				cs[i].AddHook(kindHook{})
			}
			b := redlock.New(cs)
			t.Cleanup(func() { b.Close() })
			key := t.Name()
			g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "o"}, TTL: time.Minute})
			switch tc.want {
			case "kind":
				var ke *driver.KindError
				if g.Acquired || !errors.As(err, &ke) || !errors.Is(err, driver.ErrKindMismatch) {
					t.Fatalf("Acquire with %v refusing the kind: %+v, %v; want a *driver.KindError", tc.refusing, g, err)
				}
				if ke.Key != key || ke.Held != driver.Permit || ke.HeldLimit != 3 || ke.Asked != driver.Exclusive {
					t.Errorf("KindError = %+v; want the key %q, held as a semaphore of 3, asked for a mutex", ke, key)
				}
				// Nothing is left taken on the nodes that granted.
				ins, err := newBackend(t, addrs).Inspect(ctx, key)
				if err != nil || ins.Held {
					t.Errorf("Inspect after the refusal: %+v, %v; want free", ins, err)
				}
			case "granted":
				if err != nil || !g.Acquired {
					t.Fatalf("Acquire with %v refusing the kind: %+v, %v; want granted by the other 3", tc.refusing, g, err)
				}
			}
		})
	}
}

// TestMutexBesideSemaphore: a key held on a quorum of the masters as a
// semaphore (by a client of package redislock on each, say) is refused to a
// mutex with a *driver.KindError naming both kinds, and TryLock fails at
// once with distlock.ErrKindMismatch.
func TestMutexBesideSemaphore(t *testing.T) {
	addrs := addrsOf(startNodes(t, 5))
	cs := newClients(t, addrs)
	ctx := context.Background()
	key := t.Name()
	k := redisnode.KeysFor(redlock.DefaultPrefix, key)
	for _, i := range []int{0, 2, 3} {
		if token, _, err := redisnode.AcquirePermit(ctx, cs[i], k, "permit-holder", time.Minute, 3); err != nil || token == 0 {
			t.Fatalf("node %d: permit: token %d, %v", i, token, err)
		}
	}
	b := newBackend(t, addrs)
	g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "o"}, TTL: time.Minute})
	var ke *driver.KindError
	if g.Acquired || !errors.As(err, &ke) {
		t.Fatalf("Acquire of a mutex held on 3 of 5 as a semaphore: %+v, %v; want a *driver.KindError", g, err)
	}
	if ke.Key != key || ke.Held != driver.Permit || ke.HeldLimit != 3 || ke.Asked != driver.Exclusive {
		t.Errorf("KindError = %+v; want key %q, held as a semaphore of 3, asked for a mutex", ke, key)
	}
	_, err = distlock.New(b).Mutex(key).TryLock(ctx)
	if !errors.Is(err, distlock.ErrKindMismatch) || !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("TryLock: %v; want ErrKindMismatch and ErrNotObtained", err)
	}
	t.Logf("TryLock: %v", err)
}
