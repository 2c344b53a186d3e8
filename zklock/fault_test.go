package zklock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestEnsemble runs the conformance suite and the fault tests on one
// 3-node ensemble, in turn: the faults kill, pause and cut off members.
func TestEnsemble(t *testing.T) {
	t.Parallel()
	e := testserver.StartEnsemble(t, 3)
	addrs := e.Addrs()
	t.Run("Conformance", func(t *testing.T) { distlocktest.Run(t, harness(t, addrs)) })
	t.Run("KindAfterReleaseElsewhere", func(t *testing.T) { testKindAfterReleaseElsewhere(t, e) })
	t.Run("KillLeader", func(t *testing.T) { testKillLeader(t, e) })
	t.Run("PlainWaitersQueue", func(t *testing.T) { testPlainWaitersQueue(t, addrs) })
	t.Run("LeaderChangeHandoff", func(t *testing.T) { testLeaderChangeHandoff(t, e) })
	t.Run("LostCreateReply", func(t *testing.T) { testLostCreateReply(t, e) })
	t.Run("ShortPartitionKeepsLock", func(t *testing.T) { testShortPartition(t, e) })
	t.Run("PartitionPastSession", func(t *testing.T) {
		p := testserver.StartProxy(t, e.Nodes[0].Addr())
		testSafeLoss(t, addrs, holderClient(t, []string{p.Addr()}), safeLossSession, p.Blackhole, p.Restore)
	})
	t.Run("SessionExpiryClosesLost", func(t *testing.T) { testSessionExpiry(t, e) })
	t.Run("PauseHolderServer", func(t *testing.T) {
		f := e.Follower(t)
		testSafeLoss(t, addrs, holderClient(t, []string{f.Addr()}), safeLossSession, func() { f.Pause(t) }, func() { f.Resume(t) })
		e.AwaitServing(t)
	})
}

// leaderChangeSession is the session timeout in testKillLeader: a holder
// keeps its lock across a leader change if the election and its renewal
// take less (less drift), and a loaded machine takes seconds for them.
const leaderChangeSession = 20 * time.Second

// testKillLeader: the leader dies while a lock is held and fair waiters
// wait. The lock is kept through the election, the waiters are then
// served in order, and tokens keep increasing.
func testKillLeader(t *testing.T, e *testserver.Ensemble) {
	addrs := e.Addrs()
	key := "kill-leader"
	opts := []distlock.Option{distlock.WithTTL(leaderChangeSession), distlock.WithFairness()}
	holder, err := distlock.New(newBackend(t, addrs, leaderChangeSession), opts...).Mutex(key).Lock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	const n = 3
	var (
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
	)
	errs := make(chan error, n)
	for range n {
		m := distlock.New(newBackend(t, addrs, leaderChangeSession), opts...).Mutex(key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctxFor(t, 60*time.Second))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			tokens = append(tokens, l.Token())
			mu.Unlock()
			errs <- l.Unlock(ctxFor(t, 10*time.Second))
		}()
	}
	admin := dial(t, addrs, sessionTimeout)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _ = admin.Sync(keyPath(key))
		kids, _, err := admin.Children(keyPath(key))
		if err == nil && len(kids) == n+1 {
			break // the waiters are in line
		}
		if time.Now().After(end) {
			t.Fatalf("the line before the leader's death: %v, %v; want the holder and %d waiters", kids, err, n)
		}
	}
	leader := e.Leader(t)
	leader.Kill(t)
	defer func() { leader.Restart(t); e.AwaitServing(t) }()
	e.Leader(t) // a new one
	time.Sleep(sessionTimeout / 2)
	if err := holder.Err(); err != nil {
		t.Fatalf("holder lost the lock across the leader change: %v", err)
	}
	if l, err := distlock.New(newBackend(t, addrs, sessionTimeout)).Mutex(key).TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(context.Background())
		}
		t.Fatalf("TryLock by another client after the leader change: %v; want ErrNotObtained", err)
	}
	mu.Lock()
	early := len(tokens)
	mu.Unlock()
	if early > 0 {
		t.Fatalf("%d waiters got the lock while it was held", early)
	}
	if err := holder.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
	last := holder.Token()
	for i, tok := range tokens {
		if tok <= last {
			t.Errorf("waiter %d got token %d, not above the previous %d", i, tok, last)
		}
		last = tok
	}
}

// testLeaderChangeHandoff: a holder keeps its lock across the leader's
// death, and the waiter in line after it, plain or fair, gets the lock as
// soon as the holder releases it: by its watch, which the client set again
// on the server it reconnected to, not by its safety poll (a minute) nor
// by the holder's lease (20s).
func testLeaderChangeHandoff(t *testing.T, e *testserver.Ensemble) {
	addrs := e.Addrs()
	for _, fair := range []bool{false, true} {
		key := "leader-change-handoff"
		opts := []distlock.Option{distlock.WithTTL(leaderChangeSession), distlock.WithSafetyPoll(time.Minute)}
		if fair {
			key += "-fair"
			opts = append(opts, distlock.WithFairness())
		}
		holder, err := distlock.New(newBackend(t, addrs, leaderChangeSession), opts...).Mutex(key).Lock(ctxFor(t, 20*time.Second))
		if err != nil {
			t.Fatalf("holder's Lock: %v", err)
		}
		granted := make(chan time.Time, 1)
		m := distlock.New(newBackend(t, addrs, leaderChangeSession), opts...).Mutex(key)
		go func() {
			l, err := m.Lock(ctxFor(t, 2*time.Minute))
			if err != nil {
				t.Errorf("waiter's Lock: %v", err)
				close(granted)
				return
			}
			granted <- time.Now()
			_ = l.Unlock(ctxFor(t, 20*time.Second))
		}()
		awaitLine(t, addrs, key, 2)
		time.Sleep(time.Second) // the waiter's watch, on a loaded machine
		leader := e.Leader(t)
		leader.Kill(t)
		e.Leader(t) // a new one
		time.Sleep(sessionTimeout / 2)
		if err := holder.Err(); err != nil {
			t.Fatalf("holder lost the lock across the leader change: %v", err)
		}
		select {
		case <-granted:
			t.Fatal("the waiter got the lock while it was held")
		default:
		}
		released := time.Now()
		if err := holder.Unlock(ctxFor(t, 20*time.Second)); err != nil {
			t.Fatalf("holder's Unlock: %v", err)
		}
		select {
		case at, ok := <-granted:
			if ok {
				t.Logf("fair %v: granted %v after the release began", fair, at.Sub(released))
			}
		case <-time.After(10 * time.Second):
			t.Errorf("fair %v: the waiter was not granted within 10s of the release after a leader change", fair)
		}
		leader.Restart(t)
		e.AwaitServing(t)
	}
}

// testLostCreateReply: the reply to the create of an owner's node is
// lost. The retry finds the node instead of making a second one, and the
// release leaves nothing behind.
func testLostCreateReply(t *testing.T, e *testserver.Ensemble) {
	p := testserver.StartProxy(t, e.Nodes[0].Addr())
	b := newBackend(t, []string{p.Addr()}, sessionTimeout)
	key := "lost-create-reply"
	owner := "owner-lost-create-reply-0123456789abcdef"
	permit := func(owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: driver.Permit}, Limit: 2, TTL: 20 * time.Second}
	}
	req := permit(owner)
	// Another permit holds the key's line in place, so that the create
	// whose reply is lost succeeds at its first try.
	first := permit("owner-before")
	if g, err := b.Acquire(ctxFor(t, 10*time.Second), first); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	dropped := p.DropReply(zklock.OwnerHash(owner))
	if g, err := b.Acquire(ctxFor(t, 10*time.Second), req); err == nil {
		t.Fatalf("Acquire with its reply dropped: %+v, nil error", g)
	}
	select {
	case <-dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy saw no create of the owner's node")
	}
	var g driver.Grant
	var err error
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if g, err = b.Acquire(ctxFor(t, 5*time.Second), req); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || !g.Acquired {
		t.Fatalf("retried Acquire: %+v, %v; want granted", g, err)
	}
	admin := dial(t, e.Addrs(), sessionTimeout)
	_, _ = admin.Sync(keyPath(key)) // its server may lag behind the leader
	kids, _, err := admin.Children(keyPath(key))
	if err != nil || len(kids) != 2 || !slices.ContainsFunc(kids, func(k string) bool { return strings.Contains(k, zklock.OwnerHash(owner)) }) {
		t.Fatalf("the key's nodes after the retry: %v, %v; want the owner's and the other permit's", kids, err)
	}
	for _, r := range []driver.Request{req, first} {
		if err := b.Release(ctxFor(t, 10*time.Second), r.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	_, _ = admin.Sync(keyPath(key))
	if kids, _, err := admin.Children(keyPath(key)); err != nil && err != zk.ErrNoNode || len(kids) != 0 {
		t.Errorf("the key's nodes after the releases: %v, %v; want none", kids, err)
	}
	l, err := distlock.New(newBackend(t, e.Addrs(), sessionTimeout)).Mutex(key).TryLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	_ = l.Unlock(context.Background())
}

// testShortPartition: the holder's connection is cut off for less than
// the session timeout; it reconnects within the session and keeps the
// lock.
func testShortPartition(t *testing.T, e *testserver.Ensemble) {
	p := testserver.StartProxy(t, e.Nodes[0].Addr())
	key := "short-partition"
	holder, err := distlock.New(newBackend(t, []string{p.Addr()}, sessionTimeout), distlock.WithTTL(20*time.Second)).Mutex(key).Lock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	p.Cut()
	time.Sleep(sessionTimeout / 3)
	p.Restore()
	time.Sleep(sessionTimeout)
	if err := holder.Err(); err != nil {
		t.Fatalf("holder lost the lock over a partition shorter than the session: %v", err)
	}
	if l, err := distlock.New(newBackend(t, e.Addrs(), sessionTimeout)).Mutex(key).TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
		if l != nil {
			_ = l.Unlock(context.Background())
		}
		t.Fatalf("TryLock by another client: %v; want ErrNotObtained", err)
	}
	if err := holder.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Unlock after the partition healed: %v", err)
	}
}

// safeLossSession is the holder's session timeout in testSafeLoss.
const safeLossSession = 3 * time.Second

// holderClient is the holder's client in testSafeLoss: a backend with a
// session of safeLossSession with holderAddrs.
func holderClient(t *testing.T, holderAddrs []string) *distlock.Client {
	return distlock.New(newBackend(t, holderAddrs, safeLossSession), distlock.WithTTL(time.Minute))
}

// testSafeLoss: the holder, on client holderC whose session the ensemble
// expires after session, is cut off by fault for longer than that. Its
// lease ends at its deadline (Err says so from then on, whether or not its
// timer ran yet) and its Done closes, and another client gets the lock
// once the session expired: after the holder's deadline, never before, and
// when it does the holder knows its lease ended.
//
// When Done closes is not checked against the deadline: its timer's
// goroutine runs when the machine schedules it, which under load can be
// more than half a second late (a run beside a CPU hog saw 686ms); a
// holder that must stop in time checks Err or its Context, which look at
// the deadline.
func testSafeLoss(t *testing.T, addrs []string, holderC *distlock.Client, session time.Duration, fault, heal func()) {
	key := "safe-loss-" + t.Name()
	holder, err := holderC.Mutex(key).Lock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	other := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(10*time.Second)).Mutex(key)
	faultAt := time.Now()
	fault()
	type grant struct {
		at        time.Time
		holderErr error // the holder's Err when the other client got the lock
	}
	got := make(chan grant, 1)
	go func() {
		l, err := other.Lock(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Errorf("other client's Lock: %v", err)
			close(got)
			return
		}
		got <- grant{time.Now(), holder.Err()}
		_ = l.Unlock(context.Background())
	}()
	// A renewal whose reply was on its way when the fault came may still
	// move the deadline; none can once it has passed.
	deadline := holder.ValidUntil()
	for {
		time.Sleep(time.Until(deadline))
		d := holder.ValidUntil()
		if !d.After(deadline) {
			break
		}
		deadline = d
	}
	if err := holder.Err(); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("holder's Err() at its deadline = %v; want ErrLockLost", err)
	}
	select {
	case <-holder.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("holder's Done not closed 10s after its deadline")
	}
	if !errors.Is(holder.Err(), distlock.ErrLockLost) {
		t.Errorf("holder's Err() = %v; want ErrLockLost", holder.Err())
	}
	g, ok := <-got
	if !ok {
		return
	}
	if !errors.Is(g.holderErr, distlock.ErrLockLost) {
		t.Errorf("another client got the lock while the holder's Err() was %v; want ErrLockLost", g.holderErr)
	}
	// The ensemble expires the session a session timeout after it last
	// heard from the client, which may be a ping shortly before the
	// fault: what must hold is that the holder's deadline came first.
	if g.at.Before(deadline) {
		t.Errorf("another client got the lock %v after the fault, %v before the holder's deadline", g.at.Sub(faultAt), deadline.Sub(g.at))
	}
	heal()
	healed = true
}

// testSessionExpiry: a grant's Lost channel closes once the client learns
// that its session expired (here, when it reconnects after a partition
// longer than the session timeout), and the holding is gone: Refresh
// reports ErrNotHeld.
func testSessionExpiry(t *testing.T, e *testserver.Ensemble) {
	const session = 2 * time.Second
	p := testserver.StartProxy(t, e.Nodes[0].Addr())
	b := newBackend(t, []string{p.Addr()}, session)
	lease := driver.Lease{Key: "session-expiry", Owner: "owner-session-expiry"}
	g, err := b.Acquire(ctxFor(t, 10*time.Second), driver.Request{Lease: lease, TTL: time.Minute})
	if err != nil || !g.Acquired || g.Lost == nil {
		t.Fatalf("Acquire: %+v, %v; want granted, with a Lost channel", g, err)
	}
	if g.ValidFor > session {
		t.Errorf("ValidFor %v with a TTL of a minute; want at most the session timeout %v", g.ValidFor, session)
	}
	p.Blackhole()
	time.Sleep(2 * session)
	select {
	case <-g.Lost:
		t.Fatal("Lost closed while the client could not yet know")
	default:
	}
	p.Restore()
	select {
	case <-g.Lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed 10s after the client could learn that its session expired")
	}
	if _, err := b.Refresh(ctxFor(t, 10*time.Second), lease, time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh after the session expired: %v; want ErrNotHeld", err)
	}
}
