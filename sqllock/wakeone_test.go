package sqllock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// waiters starts n waiters for key, each a client of its own on a pool of
// its own whose requests are counted, listening on another pool. Each
// sends the lock it gets on got. Their safety poll is long: only a
// release's notice wakes them within the test.
func waiters(t *testing.T, d database, key string, n int, poll time.Duration) ([]*countingConnector, chan *distlock.Lock) {
	ctx, cancel := context.WithCancel(ctxFor(t, 2*time.Minute))
	got := make(chan *distlock.Lock, n)
	var counters []*countingConnector
	var wg sync.WaitGroup
	for range n {
		db, c := d.counting(t)
		counters = append(counters, c)
		b := d.backendOn(t, db, sqllock.WithListener(pglisten.New(d.open(t))))
		m := distlock.New(b, distlock.WithTTL(time.Minute), distlock.WithSafetyPoll(poll)).Mutex(key)
		wg.Go(func() {
			l, err := m.Lock(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("Lock: %v", err)
				}
				return
			}
			got <- l
		})
	}
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel) // first: a test that failed leaves waiters
	return counters, got
}

// holding returns the lock on key, taken by a client of its own.
func holding(t *testing.T, d database, key string) *distlock.Lock {
	t.Helper()
	l, err := distlock.New(d.backend(t), distlock.WithTTL(time.Minute)).Mutex(key).Lock(ctxFor(t, time.Minute))
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return l
}

// attempts counts the mutex attempts among what the pools sent since the
// last call.
func attempts(counters []*countingConnector) (n int) {
	for _, c := range counters {
		for _, r := range requests(c.take()) {
			if strings.Contains(r, "WITH up AS") {
				n++
			}
		}
	}
	return n
}

// settle waits until the waiters have sent nothing for a while: each has
// made its attempts, begun its watch and marked the key. It returns the
// attempts they made meanwhile.
func settle(t *testing.T, counters []*countingConnector) (made int) {
	t.Helper()
	for quiet := 0; quiet < 3; {
		time.Sleep(300 * time.Millisecond)
		sent := 0
		for _, c := range counters {
			c.mu.Lock()
			sent += len(c.log)
			c.mu.Unlock()
		}
		made += attempts(counters)
		if sent == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return made
}

// TestReleaseWakesOneWaiter: with four processes waiting for a mutex, its
// release on PostgreSQL makes one of them try again, not all four: the
// notice names one listener, which wakes one waiter, and the others sleep
// on. Each release after it wakes the next.
func TestReleaseWakesOneWaiter(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 2*time.Minute)
	l := holding(t, d, "one-waiter")
	const n = 4
	counters, got := waiters(t, d, "one-waiter", n, time.Hour)
	settle(t, counters)
	for i := range n {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		select {
		case l = <-got:
		case <-ctx.Done():
			t.Fatalf("release %d: no waiter got the lock: %v", i, ctx.Err())
		}
		// Any other waiter woken would try within a round trip or two.
		time.Sleep(500 * time.Millisecond)
		if a := attempts(counters); a != 1 {
			t.Fatalf("release %d with %d waiters made them try %d times; want 1", i, n-i, a)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestVanishedNamedWaiter: a release whose notice names a listener that no
// longer exists (its process died while waiting) leaves the others to
// their safety poll, no longer: a live waiter gets the lock, and the dead
// listener's name is gone from the key's wakers.
func TestVanishedNamedWaiter(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 2*time.Minute)
	l := holding(t, d, "vanished")
	counters, got := waiters(t, d, "vanished", 1, 2*time.Second)
	settle(t, counters)
	admin := d.open(t)
	// The dead listener began to wait first.
	if _, err := admin.ExecContext(ctx, `UPDATE `+sqllock.DefaultTable+` SET wakers = 'dead0000dead0000,' || wakers WHERE name = 'vanished'`); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case l = <-got:
	case <-ctx.Done():
		t.Fatalf("the live waiter did not get the lock: %v", ctx.Err())
	}
	var wakers string
	if err := admin.QueryRowContext(ctx, `SELECT wakers FROM `+sqllock.DefaultTable+` WHERE name = 'vanished'`).Scan(&wakers); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(wakers, "dead") {
		t.Errorf("wakers %q still name the vanished listener", wakers)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestWatchedKeyOneAttempt: a waiter that begins while another waiter of
// its backend watches the key already makes one attempt, then sleeps: the
// listener was in place before that attempt and heard no release since
// (driver.MarkWatcher), so no retry after the watch is needed.
func TestWatchedKeyOneAttempt(t *testing.T) {
	_, d := startPostgres(t)
	ctx, cancel := context.WithCancel(ctxFor(t, 2*time.Minute))
	l := holding(t, d, "watched-once")
	db, c := d.counting(t)
	b := d.backendOn(t, db, sqllock.WithListener(pglisten.New(d.open(t))))
	got := make(chan *distlock.Lock, 2)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	wait := func() {
		// A client of its own: a client's waiters of one key take turns
		// in the process before they ask the database.
		m := distlock.New(b, distlock.WithTTL(time.Minute), distlock.WithSafetyPoll(time.Hour)).Mutex("watched-once")
		wg.Go(func() {
			if l, err := m.Lock(ctx); err == nil {
				got <- l
			} else if ctx.Err() == nil {
				t.Errorf("Lock: %v", err)
			}
		})
	}
	counters := []*countingConnector{c}
	wait()
	settle(t, counters)
	wait()
	if n := settle(t, counters); n != 1 {
		t.Errorf("a waiter on a key its backend watched already made %d attempts before sleeping; want 1", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case l = <-got:
		case <-ctx.Done():
			t.Fatalf("the waiters did not get the lock: %v", ctx.Err())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleaserWaitsForTheNamedWaiter: right after a release that named a
// waiting listener, the releasing backend asking again is refused for the
// named waiter's turn (the refusal says when it ends, a short while), and
// a listener that vanished holds the key up no longer than that.
func TestReleaserWaitsForTheNamedWaiter(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, time.Minute)
	releaser := d.backend(t, sqllock.WithListener(nil))
	l := driver.Lease{Key: "kept", Owner: "releaser"}
	req := driver.Request{Lease: l, TTL: time.Minute}
	admin := d.open(t)
	for try := 0; ; try++ {
		if g, err := releaser.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		// A waiter of a listener that has not asked yet marked the key.
		if _, err := admin.ExecContext(ctx, `UPDATE `+sqllock.DefaultTable+` SET waiting_us = 1e18 WHERE name = 'kept'`); err != nil {
			t.Fatal(err)
		}
		_, _ = admin.ExecContext(ctx, `UPDATE `+sqllock.DefaultTable+` SET wakers = 'abcdef0123456789,' WHERE name = 'kept'`)
		if err := releaser.Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
		released := time.Now()
		g, err := releaser.Acquire(ctx, req)
		if err != nil {
			t.Fatalf("Acquire again: %v", err)
		}
		if time.Since(released) > 10*time.Millisecond && try < 10 {
			// Past the named waiter's turn (20ms) on a loaded machine:
			// again.
			if g.Acquired {
				_ = releaser.Release(ctx, l)
			}
			continue
		}
		if g.Acquired {
			t.Fatalf("the releaser took the key back before the waiter its release named could ask")
		}
		if g.RetryAfter > 25*time.Millisecond {
			t.Fatalf("refused for the named waiter's turn with RetryAfter %v; want at most its 20ms", g.RetryAfter)
		}
		time.Sleep(g.RetryAfter)
		if g, err := releaser.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("Acquire after the named waiter's turn: %+v, %v; want granted", g, err)
		}
		return
	}
}
