package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// within runs f and fails the test if it takes longer than bound.
func within(t *testing.T, bound time.Duration, what string, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	d := time.Since(start)
	if d > bound {
		t.Errorf("%s took %v; want within %v", what, d, bound)
	}
	return d
}

// TestTwoOfFiveKilled: with two masters dead, three still make a quorum:
// locks are taken, renewed, contended and released as usual.
func TestTwoOfFiveKilled(t *testing.T) {
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	c := distlock.New(newBackend(t, addrs), distlock.WithTTL(time.Second))
	held, err := c.Mutex(t.Name() + "held").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srvs[1].Kill(t)
	srvs[3].Kill(t)

	m := c.Mutex(t.Name())
	var l *distlock.Lock
	within(t, time.Second, "TryLock with 2 of 5 down", func() {
		if l, err = m.TryLock(ctx); err != nil {
			t.Fatalf("TryLock with 2 of 5 down: %v", err)
		}
	})
	if err := held.Refresh(ctx, time.Second); err != nil {
		t.Errorf("Refresh of a lock taken before the kill: %v", err)
	}
	if err := l.Refresh(ctx, time.Second); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	other := distlock.New(newBackend(t, addrs))
	if _, err := other.Mutex(t.Name()).TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("TryLock of a held key with 2 of 5 down: %v; want ErrNotObtained (contention, not an error)", err)
	}
	// The watchdog keeps it over several TTLs.
	time.Sleep(2 * time.Second)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost under the watchdog with 2 of 5 down: %v", err)
	}
	// A waiter is woken by the release through the surviving nodes.
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w, err := other.Mutex(t.Name(), distlock.WithSafetyPoll(30*time.Second)).Lock(wctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	within(t, time.Second, "Unlock with 2 of 5 down", func() {
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	})
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("waiter not woken 2s after the release")
	}
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the lock taken before the kill: %v", err)
	}
}

// TestThreeOfFiveKilled: without a quorum every call fails within its
// deadline, with an error that names the dead nodes; nothing hangs or
// leaks, and locking works again once the nodes are back.
func TestThreeOfFiveKilled(t *testing.T) {
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	before := runtime.NumGoroutine()
	// The nodes come back empty: the restart guard holds new grants back
	// until they have run for the maximum lease length.
	b := newBackend(t, addrs, redlock.WithMaxTTL(time.Second))
	// A release repeats until its outcome is known, at most as long as the
	// call's deadline or this.
	c := distlock.New(b, distlock.WithTTL(time.Second), distlock.WithReleaseTimeout(200*time.Millisecond))
	m := c.Mutex(t.Name())
	held, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dead := []int{0, 2, 4}
	for _, i := range dead {
		srvs[i].Kill(t)
	}
	// checkErr wants a quorum error naming exactly the dead nodes.
	checkErr := func(what string, err error) {
		t.Helper()
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNoQuorum) {
			t.Errorf("%s: %v; want a *QuorumError", what, err)
			return
		}
		if qe.Quorum != 3 || len(qe.Nodes) != 5 {
			t.Errorf("%s: quorum %d of %d nodes; want 3 of 5", what, qe.Quorum, len(qe.Nodes))
		}
		failed := 0
		for i, n := range qe.Nodes {
			isDead := i%2 == 0
			if n.Addr != addrs[i] {
				t.Errorf("%s: node %d named %q, want %q", what, i, n.Addr, addrs[i])
			}
			// A node whose reply came after the outcome was decided is
			// skipped, dead or alive; otherwise dead means failed. A live
			// node whose request the call's deadline cut short, on a busy
			// machine, is slow, not dead.
			slow := errors.Is(n.Err, os.ErrDeadlineExceeded) || errors.Is(n.Err, context.DeadlineExceeded)
			switch {
			case n.Outcome == redlock.Skipped:
			case !isDead && slow:
			case isDead != (n.Outcome == redlock.Failed):
				t.Errorf("%s: node %d (dead: %v) outcome %v (%v)", what, i, isDead, n.Outcome, n.Err)
			case isDead:
				failed++
				if !strings.Contains(err.Error(), addrs[i]+": dial tcp") {
					t.Errorf("%s: error does not name dead node %s and why: %v", what, addrs[i], err)
				}
			}
		}
		if failed == 0 {
			t.Errorf("%s: no node reported failed: %v", what, err)
		}
	}
	bounded := func(name string, f func(ctx context.Context) error) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		var err error
		within(t, 2*time.Second, name+" with 3 of 5 down and a 500ms deadline", func() { err = f(ctx) })
		if err == nil {
			t.Errorf("%s with 3 of 5 down: no error", name)
		}
		return err
	}
	// First, while the held lease is valid: the calls below may outlast it.
	checkErr("Refresh", bounded("Refresh", func(ctx context.Context) error { return held.Refresh(ctx, time.Second) }))
	err = bounded("TryLock", func(ctx context.Context) error { _, err := m.TryLock(ctx); return err })
	checkErr("TryLock", err)
	if errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("TryLock with 3 of 5 down says ErrNotObtained: nodes down is not contention")
	}
	err = bounded("Lock", func(ctx context.Context) error { _, err := m.Lock(ctx); return err })
	checkErr("Lock", err)
	if !errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock: %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	t.Logf("Lock's error: %v", err)
	_, err = b.Inspect(context.Background(), t.Name())
	if err == nil {
		t.Errorf("Inspect with 3 of 5 down: no error")
	}
	bounded("Unlock", func(ctx context.Context) error { return held.Unlock(ctx) })

	// All 5 down: Watch fails (no node could subscribe), naming them.
	srvs[1].Kill(t)
	srvs[3].Kill(t)
	if _, err := b.Watch(context.Background(), t.Name(), ""); err == nil || !strings.Contains(err.Error(), addrs[3]) {
		t.Errorf("Watch with every node down: %v; want an error naming the nodes", err)
	}

	for _, s := range srvs {
		s.Restart(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the restarts: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock after the restarts: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	redistest.GoroutinesSettle(t, before, 2*time.Second)
}

// TestPausedNode: a master that stops answering (SIGSTOP) costs at most
// one node timeout where its answer matters: acquisitions and renewals
// succeed without it, contention is reported without waiting for it, and
// waiters are still woken. A release waits for it as long as it may, and
// then says that the node may still hold the lock.
func TestPausedNode(t *testing.T) {
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	const ttl = 10 * time.Second
	nodeTimeout := redlock.DefaultNodeTimeout(ttl)
	c := distlock.New(newBackend(t, addrs), distlock.WithTTL(ttl), distlock.WithReleaseTimeout(500*time.Millisecond))
	m := c.Mutex(t.Name())
	srvs[2].Pause(t)
	defer srvs[2].Resume(t)

	// A grant waits for every node, the paused one up to the node timeout.
	var l *distlock.Lock
	d := within(t, nodeTimeout+2*time.Second, "TryLock with a paused node", func() {
		var err error
		if l, err = m.TryLock(ctx); err != nil {
			t.Fatalf("TryLock with a paused node: %v", err)
		}
	})
	t.Logf("TryLock with one of 5 paused: %v", d)
	if left := time.Until(l.ValidUntil()); left < ttl-driver.DefaultDrift(ttl)-d-200*time.Millisecond {
		t.Errorf("lease has %v left of %v after a TryLock of %v: more than the wait was taken", left, ttl, d)
	}
	within(t, nodeTimeout+2*time.Second, "Refresh with a paused node", func() {
		if err := l.Refresh(ctx, ttl); err != nil {
			t.Errorf("Refresh: %v", err)
		}
	})

	// Contention is decided by the four live nodes: no wait for the paused
	// one, even with a long node timeout.
	slow := distlock.New(newBackend(t, addrs, redlock.WithNodeTimeout(3*time.Second)))
	within(t, time.Second, "TryLock of a held key (node timeout 3s)", func() {
		if _, err := slow.Mutex(t.Name()).TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
			t.Errorf("TryLock of a held key: %v; want ErrNotObtained", err)
		}
	})

	// A waiter subscribes without waiting for the paused node and is woken.
	got := make(chan time.Time, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w, err := slow.Mutex(t.Name(), distlock.WithSafetyPoll(30*time.Second)).Lock(wctx)
		if err != nil {
			t.Errorf("waiter: %v", err)
			close(got)
			return
		}
		got <- time.Now()
		_ = w.Unlock(ctx)
	}()
	time.Sleep(200 * time.Millisecond)
	uctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err := l.Unlock(uctx)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Op != "release" || qe.Succeeded() < 3 || qe.Nodes[2].Outcome != redlock.Failed {
		t.Errorf("Unlock with a paused node: %v; want a release *QuorumError: a quorum released, node 2 in doubt", err)
	}
	released := time.Now()
	select {
	case at, ok := <-got:
		// The waiter's own acquisition waits out the paused node (3s).
		if d := at.Sub(released); ok && d > 3*time.Second+time.Second {
			t.Errorf("waiter took the lock %v after the release", d)
		}
	case <-time.After(6 * time.Second):
		t.Fatalf("waiter not woken 6s after the release")
	}
}

// TestRetryAvoidsPendingRequests: when an attempt fails while a node is
// paused, the release sent there may run late, after a later grant of the
// same owner — and delete it. A retry by that owner therefore leaves the
// node out until the release is known to have run.
func TestRetryAvoidsPendingRequests(t *testing.T) {
	srvs := startNodes(t, 3)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	key := t.Name()
	holder := newBackend(t, addrs)
	if g, err := holder.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "holder"}, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v, %v", g, err)
	}
	// Late EVALSHAs of scripts a node never saw would fail with NOSCRIPT
	// and show nothing.
	for _, rdb := range newClients(t, addrs) {
		if err := redisnode.LoadScripts(ctx, rdb); err != nil {
			t.Fatal(err)
		}
	}
	srvs[2].Pause(t)
	b := newBackend(t, addrs, redlock.WithNodeTimeout(3*time.Second))
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: "waiter"}, TTL: time.Minute}
	g, err := b.Acquire(ctx, req)
	if err != nil || g.Acquired {
		t.Fatalf("first attempt: %+v, %v; want not obtained", g, err)
	}
	// The holder's release is in doubt on the paused node only.
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = holder.Release(rctx, driver.Lease{Key: key, Owner: "holder"})
	cancel()
	if qe := (*redlock.QuorumError)(nil); !errors.As(err, &qe) || qe.Succeeded() != 2 {
		t.Fatalf("holder's release: %v; want a *QuorumError, released on the 2 live nodes", err)
	}
	// The second attempt cannot count the paused node: it would wait a node
	// timeout for it otherwise.
	within(t, 1500*time.Millisecond, "retry with a paused node (node timeout 3s)", func() {
		g, err = b.Acquire(ctx, req)
	})
	if err != nil || !g.Acquired {
		t.Fatalf("retry: %+v, %v; want granted by the two live nodes", g, err)
	}
	srvs[2].Resume(t)
	// Once the release has run there, the node counts again: a refresh
	// re-takes it for the owner.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := b.Refresh(ctx, driver.Lease{Key: key, Owner: req.Owner}, time.Minute); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		v, _ := srvs[2].Do(t, "GET", lockKey(key))
		if strings.HasPrefix(v, "waiter\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed node holds %q 5s later; want the lock re-taken for the owner by Refresh", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.Release(ctx, driver.Lease{Key: key, Owner: req.Owner}); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestRestartWithoutPersistence shows the known unsafety of Redlock and its
// remedies, on three masters A, B and C. A holder takes the lock on A and B
// while C is unreachable. B then restarts empty.
//
//   - Restarted at once, B is held back by the restart guard: it grants
//     nothing new until it has run for the maximum lease length, so the
//     second client wins only after the first lease ended, on {A, C}.
//   - With the guard off, B restarted at once lets a second client win
//     {B, C} while the first lease is still valid: two holders. Their
//     tokens still increase: B's counter resumes at its clock.
//   - Kept down for longer than the TTL, B cannot help anyone while the
//     first lease lasts; the second client wins only after it ended.
//   - With persistence (appendfsync always), B remembers the lock.
func TestRestartWithoutPersistence(t *testing.T) {
	if testing.Short() {
		t.Skip("restart scenarios skipped in -short mode")
	}
	const ttl = time.Second
	setup := func(t *testing.T, guard []redlock.Option, opts ...testserver.Option) (a, b *testserver.Redis, cut *testserver.Proxy, first *distlock.Lock, second *distlock.Mutex) {
		a, b = testserver.StartRedis(t), testserver.StartRedis(t, opts...)
		c := testserver.StartRedis(t)
		cut = testserver.StartProxy(t, c.Addr())
		addrs := []string{a.Addr(), b.Addr(), cut.Addr()}
		key := t.Name()
		m1 := distlock.New(newBackend(t, addrs, guard...), distlock.WithTTL(ttl), distlock.WithoutAutoRefresh()).Mutex(key)
		// The second client's leases are short: an attempt decided by A's
		// and B's quick refusals can leave a late grant on C (its release
		// overtaken by the acquisition), which lasts until its TTL ends; so
		// it waits (Lock) where it must win. (Not too short: its node
		// timeout is a quarter of it.)
		second = distlock.New(newBackend(t, addrs, guard...), distlock.WithTTL(time.Second)).Mutex(key)
		for range 2 { // counters in sync on all three
			l, err := m1.TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Unlock(context.Background())
		}
		cut.Cut()
		first, err := m1.TryLock(context.Background())
		if err != nil {
			t.Fatalf("first holder with C cut off: %v", err)
		}
		return a, b, cut, first, second
	}

	t.Run("immediate restart: the guard holds B back", func(t *testing.T) {
		_, b, cut, first, second := setup(t, nil)
		b.Kill(t)
		b.Restart(t)
		cut.Restore()
		for time.Now().Before(first.ValidUntil()) {
			if l, err := second.TryLock(context.Background()); err == nil {
				// An attempt begun while the first lease was valid may win
				// once it has ended, on {A, C}: B must not have granted.
				overlap := time.Now().Before(first.ValidUntil())
				onB, _ := b.Do(t, "GET", lockKey(t.Name()))
				_ = l.Unlock(context.Background())
				if overlap || leased(onB) {
					t.Fatalf("second client won while B was restarted empty (B granted: %v, first lease valid: %v)", leased(onB), overlap)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := second.Lock(ctx)
		if err != nil {
			t.Fatalf("second client after the first lease ended: %v; want it to win {A, C}", err)
		}
		defer l.Unlock(context.Background())
		if l.Token() <= first.Token() {
			t.Errorf("second token %d is not above the first %d", l.Token(), first.Token())
		}
	})

	t.Run("immediate restart, guard off: two holders", func(t *testing.T) {
		_, b, cut, first, second := setup(t, []redlock.Option{redlock.WithoutRestartGuard()})
		b.Kill(t)
		// B's counter resumes at its clock rounded down to TokenGrain,
		// above the lost tokens if the restart took longer than that.
		time.Sleep(redlock.TokenGrain)
		b.Restart(t)
		cut.Restore()
		l, err := second.TryLock(context.Background())
		if err != nil {
			t.Fatalf("second client after B restarted empty: %v; want it to win {B, C}", err)
		}
		defer l.Unlock(context.Background())
		if first.Err() != nil || !time.Now().Before(first.ValidUntil()) {
			t.Fatalf("first lease ended (%v) before the second was granted: the overlap was not shown", first.Err())
		}
		t.Logf("two holders at once: tokens %d and %d", first.Token(), l.Token())
		if l.Token() <= first.Token() {
			t.Errorf("second token %d is not above the first %d: B's counter restarted below it", l.Token(), first.Token())
		}
	})

	t.Run("delayed restart: no overlap", func(t *testing.T) {
		_, b, cut, first, second := setup(t, nil)
		b.Kill(t)
		downSince := time.Now()
		cut.Restore()
		// While the first lease lasts, A refuses and B is down: no quorum.
		for time.Now().Before(first.ValidUntil()) {
			if l, err := second.TryLock(context.Background()); err == nil {
				// An attempt begun while the first lease was valid may win
				// once it has ended, on {A, C}.
				overlap := time.Now().Before(first.ValidUntil())
				_ = l.Unlock(context.Background())
				if overlap {
					t.Fatalf("second client won while B was down and the first lease valid")
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Until(downSince.Add(ttl + 100*time.Millisecond)))
		b.Restart(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := second.Lock(ctx)
		if err != nil {
			t.Fatalf("second client after the first lease expired: %v", err)
		}
		defer l.Unlock(context.Background())
		select {
		case <-first.Done():
		default:
			t.Errorf("first lease still valid when the second was granted")
		}
		if l.Token() <= first.Token() {
			t.Errorf("second token %d is not above the first %d", l.Token(), first.Token())
		}
	})

	t.Run("persistence: B remembers", func(t *testing.T) {
		_, b, cut, first, second := setup(t, nil, testserver.WithPersistence())
		b.Kill(t)
		b.Restart(t)
		cut.Restore()
		if l, err := second.TryLock(context.Background()); !errors.Is(err, distlock.ErrNotObtained) {
			if l != nil {
				_ = l.Unlock(context.Background())
			}
			t.Fatalf("second client with a persistent B: %v; want ErrNotObtained", err)
		}
		if err := first.Unlock(context.Background()); err != nil {
			t.Fatalf("first Unlock: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := second.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		if l.Token() <= first.Token() {
			t.Errorf("second token %d is not above the first %d", l.Token(), first.Token())
		}
	})
}

// TestRefusalsWithTooManyFailures: refusals do not make a missed quorum
// contention when the failed nodes alone rule a quorum out: with three of
// five masters paused, TryLock of a key the other two hold is an error
// (the nodes are the problem), not ErrNotObtained — even though the two
// refusals arrive first.
func TestRefusalsWithTooManyFailures(t *testing.T) {
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	holder, err := distlock.New(newBackend(t, addrs)).Mutex(t.Name()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	for _, i := range []int{0, 1, 2} {
		srvs[i].Pause(t)
		defer srvs[i].Resume(t)
	}
	// The release of the failed attempt waits for the paused nodes as long
	// as the release timeout allows.
	c := distlock.New(newBackend(t, addrs, redlock.WithNodeTimeout(200*time.Millisecond)),
		distlock.WithReleaseTimeout(200*time.Millisecond))
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	within(t, 2*time.Second, "TryLock with 3 of 5 paused", func() {
		_, err = c.Mutex(t.Name()).TryLock(tctx)
	})
	var qe *redlock.QuorumError
	if errors.Is(err, distlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatalf("TryLock with 3 of 5 paused and the key held: %v; want a *QuorumError, not ErrNotObtained", err)
	}
	for i, n := range qe.Nodes {
		if paused := i < 3; paused != (n.Outcome == redlock.Failed) {
			t.Errorf("node %d (paused: %v): %v, %v", i, paused, n.Outcome, n.Err)
		}
	}
}

// TestExclusionUnderTimeouts: with a node timeout so short that replies
// are often late, attempts fail half-way all the time and their releases
// race with the same owner's next attempt. Mutual exclusion must hold.
// Progress is not the point: on a loaded machine most attempts time out,
// and a worker may not get the lock within its 30s at all; but enough
// critical sections must run for the check to mean something.
func TestExclusionUnderTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test skipped in -short mode")
	}
	srvs := startNodes(t, 5)
	addrs := addrsOf(srvs)
	const workers, rounds = 6, 10
	var inside, overlaps, done atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		m := distlock.New(newBackend(t, addrs, redlock.WithNodeTimeout(2*time.Millisecond)),
			distlock.WithTTL(2*time.Second)).Mutex(t.Name())
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Logf("Lock: %v", err)
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				done.Add(1)
				// With 2ms per node, a release may time out: the lease then
				// expires, and the next holder waits for it.
				_ = l.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d critical sections overlapped", n)
	}
	if n := done.Load(); n < 2*workers {
		t.Errorf("only %d critical sections ran: too few to check exclusion", n)
	}
	t.Logf("%d critical sections", done.Load())
}

// holdBackRelease makes the first release script its client sends look
// lost (an error comes back at once) and runs it on the server only when
// the test closes run: a reply lost in the network, the request late.
type holdBackRelease struct {
	run  chan struct{}
	done chan struct{}
	used atomic.Bool
}

func (*holdBackRelease) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*holdBackRelease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdBackRelease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// The release script is the one that names the release channel.
		args := cmd.Args()
		isRelease := cmd.Name() == "evalsha" && slices.ContainsFunc(args, func(a any) bool {
			return strings.HasSuffix(fmt.Sprint(a), ":released")
		})
		if !isRelease || !h.used.CompareAndSwap(false, true) {
			return next(ctx, cmd)
		}
		late := redis.NewCmd(context.Background(), args...)
		go func() {
			defer close(h.done)
			<-h.run
			_ = next(context.Background(), late)
		}()
		err := errors.New("i/o timeout (injected: the release will run late)")
		cmd.SetErr(err)
		return err
	}
}

// TestLateReleaseCannotUndoRetry: a failed attempt's release whose reply
// was lost can run after the same owner's next attempt was granted on that
// node, and delete that grant. The next attempt must not count the node,
// or the owner believes in a quorum it does not have and a second client
// gets in.
func TestLateReleaseCannotUndoRetry(t *testing.T) {
	srvs := startNodes(t, 3)
	addrs := addrsOf(srvs)
	ctx := context.Background()
	key := t.Name()
	clients := newClients(t, addrs)
	for _, c := range clients {
		if err := redisnode.LoadScripts(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	hold := &holdBackRelease{run: make(chan struct{}), done: make(chan struct{})}
	clients[2].AddHook(hold)
	b := redlock.New(clients)
	t.Cleanup(func() { b.Close() })

	// Another owner holds nodes 0 and 1 (on node 1 briefly).
	if _, err := srvs[0].Do(t, "SET", lockKey(key), "other\n1\n0\n", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	if _, err := srvs[1].Do(t, "SET", lockKey(key), "other\n1\n0\n", "PX", "500"); err != nil {
		t.Fatal(err)
	}
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: "owner"}, TTL: time.Minute}
	// Attempt 1: node 2 grants, 0 and 1 refuse; the release sent to node 2
	// is held back.
	if g, err := b.Acquire(ctx, req); err != nil || g.Acquired {
		t.Fatalf("attempt 1: %+v, %v; want not obtained", g, err)
	}
	// The refusals may decide attempt 1 before node 2 answers; its release
	// then follows node 2's reply, a moment later.
	for deadline := time.Now().Add(5 * time.Second); !hold.used.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the release of attempt 1 was not held back: the fault was not injected")
		}
	}
	// Node 0 is freed; node 1 still refuses. Attempt 2 must not count node
	// 2, where its grant would be undone.
	if _, err := srvs[0].Do(t, "DEL", lockKey(key)); err != nil {
		t.Fatal(err)
	}
	g2, err := b.Acquire(ctx, req)
	close(hold.run)
	select {
	case <-hold.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the held-back release did not run")
	}
	// Once node 1's foreign lock expires, a second client tries.
	time.Sleep(600 * time.Millisecond)
	other := newBackend(t, addrs)
	gy, err2 := other.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "second"}, TTL: time.Minute})
	t.Logf("attempt 2: %+v, %v; second client: %+v, %v", g2, err, gy, err2)
	if g2.Acquired && gy.Acquired {
		t.Fatalf("two holders: the owner's retry counted a grant that its own late release deleted")
	}
}
