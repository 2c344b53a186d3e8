package zklock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/zklock"
)

// opPing is the opcode of the client's heartbeat, which says nothing of
// what a lock call costs.
const opPing = 11

// recorded opens a backend whose connection records the requests it sends.
func recorded(t *testing.T, addrs []string) (*zklock.Backend, *recorder) {
	t.Helper()
	rec := &recorder{}
	conn := dial(t, addrs, sessionTimeout, rec.dial)
	b := zklock.New(conn, sessionTimeout)
	t.Cleanup(func() { _ = b.Close() })
	return b, rec
}

// calls returns the requests recorded from i on, less the pings.
func (r *recorder) calls(i int) []request {
	return slices.DeleteFunc(r.since(i), func(q request) bool { return q.op == opPing })
}

// testRoundTrips: an uncontended acquire is one request (a transaction
// that creates the node and tells whether it is alone in its line), a
// release one.
func testRoundTrips(t *testing.T, addrs []string) {
	b, rec := recorded(t, addrs)
	ctx := ctxFor(t, 30*time.Second)
	const key = "round-trips"
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: "owner-round-trips-1"}, TTL: 20 * time.Second}
	for i := range 2 { // the first makes the key's nodes
		mark := rec.len()
		g, err := b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		acquire := rec.calls(mark)
		mark = rec.len()
		if err := b.Release(ctx, req.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		release := rec.calls(mark)
		if i > 0 && (len(acquire) != 1 || len(release) != 1) {
			t.Fatalf("uncontended acquire sent %v, release %v; want one request each", acquire, release)
		}
	}
}

// grantMark counts the requests its backend sent up to its first grant,
// before the caller sees the grant: package distlock renews a grant valid
// for less than half its TTL at once (here every grant, capped by the 6s
// session), and that renewal, sent after the grant, must not be counted
// as the grant's.
type grantMark struct {
	*zklock.Backend
	rec *recorder
	end atomic.Int64 // the recorder's length at the first grant, plus one
}

func (g *grantMark) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	gr, err := g.Backend.Acquire(ctx, req)
	if err == nil && gr.Acquired {
		g.end.CompareAndSwap(0, int64(g.rec.len())+1)
	}
	return gr, err
}

// testHandoffRoundTrips: a fair waiter told by its watch that the one
// node ahead of it left takes the lock without a request of its own.
func testHandoffRoundTrips(t *testing.T, addrs []string) {
	rb, rec := recorded(t, addrs)
	b := &grantMark{Backend: rb, rec: rec}
	ctx := ctxFor(t, 30*time.Second)
	const key = "handoff-round-trips"
	holder := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(20*time.Second))
	h, err := holder.Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("holder's Lock: %v", err)
	}
	waiter := distlock.New(b, distlock.WithTTL(20*time.Second), distlock.WithFairness(), distlock.WithSafetyPoll(time.Minute))
	got := make(chan int, 1)
	go func() {
		l, err := waiter.Mutex(key).Lock(ctx)
		if err != nil {
			t.Errorf("waiter's Lock: %v", err)
			got <- -1
			return
		}
		got <- int(b.end.Load()) - 1
		_ = l.Unlock(context.Background())
	}()
	awaitLine(t, addrs, key, 2)
	// Its attempts and its watch are done when its connection is quiet.
	for n := -1; n != len(rec.calls(0)); {
		n = len(rec.calls(0))
		time.Sleep(500 * time.Millisecond)
	}
	mark := rec.len()
	if err := h.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	var end int
	select {
	case end = <-got:
	case <-ctx.Done():
		t.Fatal("the waiter did not get the lock")
	}
	if end < 0 {
		return
	}
	sent := slices.DeleteFunc(rec.since(mark)[:end-mark], func(q request) bool { return q.op == opPing })
	if len(sent) > 0 {
		t.Fatalf("the waiter sent %v between the release and its grant; want none", sent)
	}
}

// awaitLine waits until key's line has n nodes.
func awaitLine(t *testing.T, addrs []string, key string, n int) {
	t.Helper()
	admin := dial(t, addrs, sessionTimeout)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _ = admin.Sync(keyPath(key))
		kids, _, err := admin.Children(keyPath(key))
		if err == nil && len(kids) == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the line of %q: %v, %v; want %d nodes", key, kids, err, n)
		}
	}
}

// plainWorkers runs workers that take and release one plain mutex back to
// back until they took it about 40 times each, and returns how often each
// got it.
func plainWorkers(t *testing.T, addrs []string, key string, workers int) []int64 {
	ctx := ctxFor(t, 60*time.Second)
	got := make([]atomic.Int64, workers)
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for w := range workers {
		m := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(10*time.Second)).Mutex(key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("worker %d: Lock: %v", w, err)
					return
				}
				got[w].Add(1)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
			}
		}()
	}
	total := func() (n int64) {
		for w := range workers {
			n += got[w].Load()
		}
		return n
	}
	for end := time.Now().Add(40 * time.Second); total() < int64(40*workers) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	counts := make([]int64, workers)
	for w := range workers {
		counts[w] = got[w].Load()
	}
	return counts
}

// testPlainWaitersQueue: a plain mutex waiter keeps a place in line, so a
// holder that asks again at once queues behind it: among workers that take
// the lock back to back, none gets it less than half as often as the mean.
// Their places go with them: the line is left empty.
func testPlainWaitersQueue(t *testing.T, addrs []string) {
	const workers = 8
	key := "plain-queue"
	counts := plainWorkers(t, addrs, key, workers)
	var total int64
	for _, c := range counts {
		total += c
	}
	t.Logf("acquisitions per worker: %v", counts)
	if mean := total / workers; slices.Min(counts) < mean/2 || mean == 0 {
		t.Errorf("a worker got the lock %d times, the mean %d; want at least half the mean (per worker: %v)", slices.Min(counts), mean, counts)
	}
	admin := dial(t, addrs, sessionTimeout)
	_, _ = admin.Sync(keyPath(key))
	if kids, _, err := admin.Children(keyPath(key)); err == nil && len(kids) > 0 {
		t.Errorf("nodes left in line after every worker returned: %v", kids)
	}
}

// testPlainGiveUpLeavesLine: a plain waiter whose Lock gives up takes its
// place out of the line before Lock returns, so the next TryLock after the
// holder's release gets the lock.
func testPlainGiveUpLeavesLine(t *testing.T, addrs []string) {
	const key = "plain-give-up"
	ctx := ctxFor(t, 30*time.Second)
	holder, err := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(20*time.Second)).Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("holder's Lock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l, err := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(20*time.Second)).Mutex(key).Lock(wctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("waiter's Lock: %v, %v; want ErrNotObtained", l, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	l, err := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(20*time.Second)).Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the waiter gave up and the holder left: %v", err)
	}
	_ = l.Unlock(ctx)
}

// slowConn delays every write: a client farther from the ensemble.
type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(p)
}

// testFarWaiterKeepsPlace: a plain waiter whose requests take 20ms longer
// to arrive than those of the holder keeps a place in line while its Lock
// waits, so the holder, releasing and asking again at once, queues behind
// it: the waiter gets the lock first, every time. (When a plain waiter
// made its node only after each release, the holder's came first almost
// every time.)
func testFarWaiterKeepsPlace(t *testing.T, addrs []string) {
	const key = "far-waiter"
	var wg sync.WaitGroup
	defer wg.Wait() // the waiter's Lock, which the cancel below ends
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn := dial(t, addrs, sessionTimeout, func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return slowConn{c, 20 * time.Millisecond}, nil
	})
	far := zklock.New(conn, sessionTimeout)
	t.Cleanup(func() { _ = far.Close() })
	near := distlock.New(newBackend(t, addrs, sessionTimeout), distlock.WithTTL(20*time.Second)).Mutex(key)
	waiter := distlock.New(far, distlock.WithTTL(20*time.Second)).Mutex(key)
	admin := dial(t, addrs, sessionTimeout)
	held, err := near.Lock(ctx)
	if err != nil {
		t.Fatalf("holder's Lock: %v", err)
	}
	for round := range 5 {
		var order atomic.Int32
		farDone := make(chan int32, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiter.Lock(ctx)
			if err != nil {
				t.Errorf("waiter's Lock: %v", err)
				farDone <- -1
				return
			}
			farDone <- order.Add(1)
			time.Sleep(50 * time.Millisecond)
			_ = l.Unlock(ctx)
		}()
		// The waiter's node stays in line between its attempts (its
		// attempt itself lasts about 60ms here).
		var since time.Time
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, _ = admin.Sync(keyPath(key))
			kids, _, err := admin.Children(keyPath(key))
			if err != nil || len(kids) != 2 {
				since = time.Time{}
			} else if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > 300*time.Millisecond {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("round %d: the waiter kept no place in line: %v, %v", round, kids, err)
			}
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("holder's Unlock: %v", err)
		}
		if held, err = near.Lock(ctx); err != nil {
			t.Fatalf("holder's Lock again: %v", err)
		}
		nearAt := order.Add(1)
		if farAt := <-farDone; farAt != 1 {
			t.Fatalf("round %d: the holder, asking again at once, got the lock before the waiter in line (waiter %d, holder %d)", round, farAt, nearAt)
		}
	}
	_ = held.Unlock(ctx)
}

// testNoLostWakeUp: fair and plain waiters that take one mutex back to
// back are each woken when their turn comes, with nothing else to wake
// them: their safety poll is a minute, longer than the test may take.
func testNoLostWakeUp(t *testing.T, addrs []string) {
	for _, fair := range []bool{false, true} {
		key := "no-lost-wake-up"
		opts := []distlock.Option{distlock.WithTTL(20 * time.Second), distlock.WithSafetyPoll(time.Minute)}
		if fair {
			key += "-fair"
			opts = append(opts, distlock.WithFairness())
		}
		ctx := ctxFor(t, 30*time.Second)
		var wg sync.WaitGroup
		for w := range 4 {
			m := distlock.New(newBackend(t, addrs, sessionTimeout), opts...).Mutex(key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					l, err := m.Lock(ctx)
					if err != nil {
						t.Errorf("fair %v, worker %d: Lock: %v", fair, w, err)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("fair %v, worker %d: Unlock: %v", fair, w, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// opNames names the opcodes of the requests a lock cycle sends.
var opNames = map[int32]string{1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData",
	8: "getChildren", opSync: "sync", opGetChildren2: "getChildren2", 14: "multi", 19: "createContainer", 101: "setWatches"}

// isWrite reports whether a request of opcode op writes.
func isWrite(op int32) bool { return op == 1 || op == 2 || op == 5 || op == 14 || op == 19 }

// testWaiterRequests: a waiter's whole cycle on a busy mutex, from its
// Lock to its Unlock (its attempts, its watch, the hand-off and its
// release), sends two writes, its node's making and its release, and two
// reads: the listing that finds it in line and the watch of the node
// ahead of it. A waiter that keeps a place does not read the lease of a
// holder it sights first: its watch tells it when the holder leaves. A
// plain waiter's first attempt, which keeps no place, looks first (a
// sync, a listing and a read of the holder's lease, which a TryLock
// needs): three more. Its watch sets itself from its attempts' listings,
// and its attempt does not read again the holder it has just read.
func testWaiterRequests(t *testing.T, addrs []string) {
	for _, fair := range []bool{false, true} {
		key, want := "waiter-requests", 5
		// A place in line (three safety polls and a second) as long as
		// the TTL, and a session that shortens neither: the waiter's node
		// is made as its place, and its grant not renewed at once (see
		// distlock's short grants).
		const session = 20 * time.Second
		opts := []distlock.Option{distlock.WithTTL(10 * time.Second), distlock.WithSafetyPoll(4500 * time.Millisecond)}
		if fair {
			key, want = key+"-fair", 2
			opts = append(opts, distlock.WithFairness())
		}
		ctx := ctxFor(t, 30*time.Second)
		holder := distlock.New(newBackend(t, addrs, session), opts...).Mutex(key)
		h, err := holder.Lock(ctx)
		if err != nil {
			t.Fatalf("holder's Lock: %v", err)
		}
		rec := &recorder{}
		b := zklock.New(dial(t, addrs, session, rec.dial), session)
		t.Cleanup(func() { _ = b.Close() })
		waiter := distlock.New(b, opts...).Mutex(key)
		if !fair {
			// The waiter's client has seen the key busy, as a holder
			// asking again at once has.
			if l, err := waiter.TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
				t.Fatalf("waiter's TryLock: %v, %v; want ErrNotObtained", l, err)
			}
		}
		mark := rec.len()
		done := make(chan error, 1)
		go func() {
			l, err := waiter.Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			done <- err
		}()
		awaitLine(t, addrs, key, 2)
		for n := -1; n != len(rec.calls(mark)); { // its attempts and its watch are done
			n = len(rec.calls(mark))
			time.Sleep(500 * time.Millisecond)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("holder's Unlock: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("fair %v: waiter's Lock and Unlock: %v", fair, err)
		}
		var writes, reads []string
		for _, q := range rec.calls(mark) {
			name, ok := opNames[q.op]
			if !ok {
				name = strconv.Itoa(int(q.op))
			}
			if isWrite(q.op) {
				writes = append(writes, name)
			} else {
				reads = append(reads, name)
			}
		}
		if len(writes) > 2 || len(reads) > want {
			t.Errorf("fair %v: a waiter's cycle sent writes %v and reads %v; want at most 2 and %d", fair, writes, reads, want)
		}
	}
}

// testPlainWatchSetOnce: a plain waiter behind a holder and another
// waiter sets one ZooKeeper watch, on the node ahead of its place; the
// watch its Lock opens after the first refusal waits for that place
// instead of watching the holder first.
func testPlainWatchSetOnce(t *testing.T, addrs []string) {
	const key = "plain-watch-set-once"
	opts := []distlock.Option{distlock.WithTTL(10 * time.Second), distlock.WithSafetyPoll(4500 * time.Millisecond)}
	const session = 20 * time.Second
	ctx := ctxFor(t, 30*time.Second)
	h, err := distlock.New(newBackend(t, addrs, session), opts...).Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatalf("holder's Lock: %v", err)
	}
	ahead := make(chan error, 1)
	go func() {
		l, err := distlock.New(newBackend(t, addrs, session), append(opts, distlock.WithFairness())...).Mutex(key).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		ahead <- err
	}()
	awaitLine(t, addrs, key, 2)
	rec := &recorder{}
	b := zklock.New(dial(t, addrs, session, rec.dial), session)
	t.Cleanup(func() { _ = b.Close() })
	waiter := distlock.New(b, opts...).Mutex(key)
	mark := rec.len()
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		done <- err
	}()
	awaitLine(t, addrs, key, 3)
	for n := -1; n != len(rec.calls(mark)); { // its attempts and its watch are done
		n = len(rec.calls(mark))
		time.Sleep(500 * time.Millisecond)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	if err := <-ahead; err != nil {
		t.Fatalf("the waiter ahead: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("plain waiter's Lock and Unlock: %v", err)
	}
	var sent []string
	watches := 0
	for _, q := range rec.calls(mark) {
		name, ok := opNames[q.op]
		if !ok {
			name = strconv.Itoa(int(q.op))
		}
		sent = append(sent, name)
		if q.op == 3 { // exists: how zklock sets a watch on one node
			watches++
		}
	}
	if watches != 1 {
		t.Errorf("the plain waiter set %d watches on nodes (requests %v); want 1, on the node ahead of its place", watches, sent)
	}
}
