package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// startWaiters starts n waiters for key, each on a client of its own
// whose waits poll every poll (longer than the test: woken by notification
// alone), and returns their backends and a channel that receives each
// lock taken. A waiter's context is cancel[i].
func startWaiters(t *testing.T, srv *testserver.Redis, key string, n int, poll time.Duration) ([]*countingBackend, []*distlock.Client, []context.CancelFunc, chan *distlock.Lock) {
	t.Helper()
	got := make(chan *distlock.Lock, n)
	bs := make([]*countingBackend, n)
	cs := make([]*distlock.Client, n)
	cancels := make([]context.CancelFunc, n)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for i := range n {
		bs[i] = &countingBackend{Backend: newBackend(t, newClient(t, srv.Addr()))}
		cs[i] = distlock.New(bs[i], distlock.WithTTL(time.Minute), distlock.WithSafetyPoll(poll))
		t.Cleanup(func() { cs[i].Close() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cancels[i] = cancel
		t.Cleanup(cancel)
		wg.Go(func() {
			l, err := cs[i].Mutex(key).Lock(ctx)
			if err == nil {
				got <- l
			} else if !errors.Is(err, context.Canceled) && !errors.Is(err, distlock.ErrClientClosed) {
				t.Error(err)
			}
		})
		// One at a time, so that each is refused (and waits) before the
		// next: the first waits longest.
		waitSettled(t, bs[:i+1])
	}
	return bs, cs, cancels, got
}

// waitSettled waits until every backend of bs has made a refused attempt
// and none has made another for a while: all of them sleep.
func waitSettled(t *testing.T, bs []*countingBackend) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, since := int32(-1), time.Now()
	for time.Now().Before(deadline) {
		total, asleep := int32(0), true
		for _, b := range bs {
			n := b.attempts.Load()
			total += n
			asleep = asleep && n >= 2 // the refusal, and the retry after subscribing
		}
		if total != last {
			last, since = total, time.Now()
		} else if asleep && time.Since(since) > 300*time.Millisecond {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the waiters did not settle")
}

func attempts(bs []*countingBackend) int32 {
	var n int32
	for _, b := range bs {
		n += b.attempts.Load()
	}
	return n
}

// TestReleaseWakesOneWaiter: the release of a plain lock that several
// clients wait for wakes one of them, which takes the lock; the others
// make no attempt (no herd). Its release, and each one after it, wakes
// the next, though no attempt was refused by their leases (the waiters
// sleep): every waiter gets the lock in turn.
func TestReleaseWakesOneWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	l := holdFor(t, srv)
	const n = 4
	bs, _, _, got := startWaiters(t, srv, t.Name(), n, time.Minute)
	before := attempts(bs)
	for i := range n {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case l = <-got:
		case <-time.After(20 * time.Second): // far below the minute a waiter sleeps
			t.Fatalf("%d of %d waiters took the lock; the others were not woken", i, n)
		}
		if i == 0 {
			time.Sleep(500 * time.Millisecond) // time for a herd to show
			if woke := attempts(bs) - before; woke != 1 {
				t.Errorf("one release with %d waiters made %d attempts, want 1", n, woke)
			}
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestVanishedWaiterPassesOn: the waiter a release names (the one that
// waited longest) is gone, its context cancelled or its client closed; the
// next waiter still gets the lock, woken at once (passed on) or by its own
// safety poll, not left asleep until the holder's lease would have ended.
func TestVanishedWaiterPassesOn(t *testing.T) {
	for _, closed := range []bool{false, true} {
		name := "cancelled"
		if closed {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			srv := testserver.StartRedis(t)
			ctx := context.Background()
			l := holdFor(t, srv)
			poll := time.Minute // the wake-up is passed on at once
			if closed {
				poll = 3 * time.Second
			}
			_, cs, cancels, got := startWaiters(t, srv, t.Name(), 2, poll)
			if closed {
				// Its notifier is gone: nobody passes the wake-up on; the
				// other waiter's own poll, shortened here, bounds the wait.
				cs[0].Close()
			} else {
				cancels[0]()
			}
			time.Sleep(200 * time.Millisecond)
			released := time.Now()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			bound := 20 * time.Second // far below the minute the waiter would sleep
			select {
			case next := <-got:
				if err := next.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			case <-time.After(bound):
				t.Fatalf("the remaining waiter was still asleep %v after the release", time.Since(released))
			}
		})
	}
}

// TestReleaserYields: a client that releases a lock and wakes another
// client's waiter by name yields to it, if it hears the lock's releases: asking again at once, it is
// refused, and the woken waiter gets the lock, rather than lose it to the
// releaser before it can ask. The yield is short, so a releaser held up
// past it may still win a round; most rounds must go to the waiter (an
// even race, without the yield, goes mostly to the releaser).
func TestReleaserYields(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	hb := newBackend(t, newClient(t, srv.Addr()))
	holder := distlock.New(hb, distlock.WithTTL(time.Minute))
	defer holder.Close()
	const rounds = 5
	yielded := 0
	for round := range rounds {
		key := fmt.Sprintf("%s-%d", t.Name(), round)
		// The holder's client hears the lock, as a worker that waited for
		// it before does: a client that never waited does not yield.
		probe, err := hb.Watch(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		m := holder.Mutex(key)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, got := startWaiters(t, srv, key, 1, time.Minute)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := m.TryLock(ctx)
		if err == nil {
			if err := again.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, distlock.ErrNotObtained) {
			t.Fatal(err)
		}
		yielded++
		select {
		case w := <-got:
			if err := w.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the woken waiter did not get the lock the releaser yielded")
		}
	}
	if yielded < 3 {
		t.Errorf("the releasing client yielded to the waiter it woke in %d of %d rounds, want most", yielded, rounds)
	}
}

// holdFor takes the test's key for a minute on srv, through a client of
// its own that the test's end closes.
func holdFor(t *testing.T, srv *testserver.Redis) *distlock.Lock {
	t.Helper()
	holder := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(time.Minute))
	t.Cleanup(func() { holder.Close() })
	l, err := holder.Mutex(t.Name()).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestHandoffCommands: a handoff between two clients (the holder, which
// hears the lock as a worker that waited for it before does, releases and
// at once asks again; the waiter it wakes takes the lock) runs at most 12
// commands on the server: the release's script (its read of the lock, the
// waiters' ZPOPMIN, the free record, the wake-up), the releaser's refused
// attempt while it yields (its script, the enlisting and the set's
// expiry), and the woken waiter's grant (its script, the read of the
// lock's records, the clock and the lease).
func TestHandoffCommands(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	hb := newBackend(t, newClient(t, srv.Addr()))
	holder := distlock.New(hb, distlock.WithTTL(time.Minute))
	defer holder.Close()
	probe, err := hb.Watch(ctx, t.Name(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	m := holder.Mutex(t.Name())
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server has the scripts by now: a first release of another key
	// loads the release script.
	if other, err := holder.Mutex(t.Name() + "-other").Lock(ctx); err != nil {
		t.Fatal(err)
	} else if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, _, got := startWaiters(t, srv, t.Name(), 1, time.Minute)
	before := srv.Commands(t)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := m.TryLock(ctx); err == nil {
		again.Unlock(ctx)
		t.Fatal("the releaser took the lock back at once: it did not yield to the waiter it woke")
	} else if !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		n := srv.Commands(t) - before
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n > 12 {
			t.Errorf("the handoff ran %d commands, want at most 12", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the woken waiter did not get the lock")
	}
}
