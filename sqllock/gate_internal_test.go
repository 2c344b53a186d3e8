package sqllock

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestReleaseWakesOneWaiterMariaDB: on MariaDB, with three processes
// waiting for a mutex whose holder waited for it too, a release wakes one
// of them through the key's wake lock, with no poll to help (theirs are
// an hour apart), and the others sleep on; the key is kept for the one
// woken, so that the releaser's own attempt right after is refused, and
// the woken one's is granted. Its release wakes the next.
func TestReleaseWakesOneWaiterMariaDB(t *testing.T) {
	dsn := testserver.StartMariaDB(t).DSN()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const key = "wake-one"
	// Each backend has a hub of its own: a process apart, as far as the
	// direct wake-up in a process goes.
	process := func() *Backend {
		b := newOn(t, openDB(t, "mysql", dsn))
		b.pollFirst, b.pollCap = time.Hour, time.Hour
		// The key is kept for the waiter woken long enough for the test
		// to see it on a loaded machine.
		b.turn = "5000000"
		b.prepareStatements()
		b.local = &localHub{watches: make(watchSet[*localWatch])}
		return b
	}
	// The first holder waited: it watches the key when it is granted.
	holder := process()
	first := waitedGrant(t, holder, key, "holder")
	type waiter struct {
		b *Backend
		w driver.Watch
		l driver.Lease
	}
	waiters := make([]*waiter, 3)
	for i := range waiters {
		b := process()
		l := driver.Lease{Key: key, Owner: "waiter" + string(rune('a'+i))}
		if g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || g.Acquired {
			t.Fatalf("waiter %d: Acquire: %+v, %v; want refused", i, g, err)
		}
		w, err := b.Watch(ctx, key, "")
		if err != nil {
			t.Fatalf("waiter %d: Watch: %v", i, err)
		}
		defer w.Close()
		waiters[i] = &waiter{b, w, l}
	}
	// woken returns the waiters whose watch fired within d.
	woken := func(d time.Duration) []*waiter {
		var out []*waiter
		deadline := time.After(d)
		for {
			for _, w := range waiters {
				select {
				case <-w.w.C():
					out = append(out, w)
				default:
				}
			}
			if len(out) > 0 {
				// Any other woken by the same release fires within a round
				// trip or two.
				time.Sleep(500 * time.Millisecond)
				for _, w := range waiters {
					select {
					case <-w.w.C():
						out = append(out, w)
					default:
					}
				}
				return out
			}
			select {
			case <-deadline:
				return nil
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	time.Sleep(time.Second) // the waiters block on the wake lock
	if w := woken(0); len(w) != 0 {
		t.Fatalf("%d waiters woken before any release", len(w))
	}
	releaser, lease := holder, first
	for round := range len(waiters) {
		if err := releaser.Release(ctx, lease); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		got := woken(10 * time.Second)
		if len(got) != 1 {
			t.Fatalf("round %d: a release woke %d of %d waiters; want 1", round, len(got), len(waiters)-round)
		}
		again := driver.Lease{Key: key, Owner: "releaser-again"}
		if g, err := releaser.Acquire(ctx, driver.Request{Lease: again, TTL: time.Minute}); err != nil || g.Acquired {
			t.Fatalf("round %d: the releaser's attempt right after: %+v, %v; want refused, the key kept for the waiter woken", round, g, err)
		}
		w := got[0]
		if g, err := w.b.Acquire(ctx, driver.Request{Lease: w.l, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("round %d: the woken waiter's attempt: %+v, %v; want granted", round, g, err)
		}
		w.w.Close()
		for i, o := range waiters {
			if o == w {
				waiters = append(waiters[:i], waiters[i+1:]...)
				break
			}
		}
		releaser, lease = w.b, w.l
	}
	if err := releaser.Release(ctx, lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// BenchmarkContendedApart is BenchmarkContended on MariaDB with each
// worker a process apart as far as the direct wake-up in a process goes
// (a hub of its own), as workers on several hosts are: 8 workers on one
// key, beside GET_LOCK held on one connection per worker.
func BenchmarkContendedApart(b *testing.B) {
	dsn := testserver.StartMariaDB(b).DSN()
	open := func() *sql.DB {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	run := func(b *testing.B, lock func(i int) func() func()) {
		const workers = 8
		locks := make([]func() func(), workers)
		for i := range locks {
			locks[i] = lock(i)
		}
		var (
			left     atomic.Int64
			mu       sync.Mutex
			last     = -1
			handoffs int
			wg       sync.WaitGroup
		)
		left.Store(int64(b.N))
		b.ResetTimer()
		start := time.Now()
		for i, l := range locks {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					unlock := l()
					mu.Lock()
					if last != i && last >= 0 {
						handoffs++
					}
					last = i
					mu.Unlock()
					unlock()
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(handoffs)/time.Since(start).Seconds(), "handoffs/s")
	}
	b.Run("GET_LOCK", func(b *testing.B) {
		run(b, func(int) func() func() {
			conn, err := open().Conn(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })
			return func() func() {
				if _, err := conn.ExecContext(context.Background(), `DO GET_LOCK('apart', 60)`); err != nil {
					b.Error(err)
				}
				return func() {
					if _, err := conn.ExecContext(context.Background(), `DO RELEASE_LOCK('apart')`); err != nil {
						b.Error(err)
					}
				}
			}
		})
	})
	b.Run("sqllock", func(b *testing.B) {
		run(b, func(int) func() func() {
			be, err := New(open())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.Close() })
			be.local = &localHub{watches: make(watchSet[*localWatch])}
			m := distlock.New(be, distlock.WithTTL(10*time.Second)).Mutex("apart")
			return func() func() {
				l, err := m.Lock(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				return func() {
					if err := l.Unlock(context.Background()); err != nil {
						b.Error(err)
					}
				}
			}
		})
	})
}

// TestWatchBoundedByLease: a watch in another process than the holder,
// whose polls may come up to an hour apart, wakes once the holder's lease
// ends unreleased, and the waiter then gets the key. On MariaDB both ways
// are checked: a holder that took the key without waiting (its waiters
// poll), and one that waited and keeps the key's wake lock while it
// stalls (its waiters block on the wake lock, no longer than the lease).
func TestWatchBoundedByLease(t *testing.T) {
	sqlite := "file:" + filepath.Join(t.TempDir(), "locks.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	maria := testserver.StartMariaDB(t).DSN()
	for _, tc := range []struct {
		name, drv, dsn string
		waited         bool
	}{
		{"SQLite", "sqlite", sqlite, false},
		{"MariaDB", "mysql", maria, false},
		{"MariaDB/wake-lock", "mysql", maria, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "bounded-" + tc.name
			process := func() *Backend {
				b := newOn(t, openDB(t, tc.drv, tc.dsn))
				b.pollCap = time.Hour
				b.local = &localHub{watches: make(watchSet[*localWatch])}
				return b
			}
			holder, waiter := process(), process()
			if tc.waited {
				hw, err := holder.Watch(ctx, key, "")
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
				defer hw.Close()
			}
			const ttl = 2 * time.Second
			l := driver.Lease{Key: key, Owner: "holder"}
			if g, err := holder.Acquire(ctx, driver.Request{Lease: l, TTL: ttl}); err != nil || !g.Acquired {
				t.Fatalf("Acquire: %+v, %v", g, err)
			}
			if tc.waited {
				holder.gates.mu.Lock()
				kept := len(holder.gates.held)
				holder.gates.mu.Unlock()
				if kept != 1 {
					t.Fatalf("the holder that waited keeps %d wake locks; want 1", kept)
				}
			}
			w, err := waiter.Watch(ctx, key, "")
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Close()
			// Past the first polls, which come soon after the watch begins.
			time.Sleep(200 * time.Millisecond)
			for len(w.C()) > 0 {
				<-w.C()
			}
			select {
			case <-w.C():
			case <-ctx.Done():
				t.Fatalf("the watch did not wake after the holder's lease of %v ended", ttl)
			}
			if g, err := waiter.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "waiter"}, TTL: time.Minute}); err != nil || !g.Acquired {
				t.Fatalf("Acquire after the watch woke: %+v, %v; want granted", g, err)
			}
		})
	}
}

// TestReleaseHandsOverInProcessMariaDB: on MariaDB, a release whose
// process has a waiter of the key hands the key's wake lock to that
// waiter in the process, without letting go of it in the server: the
// waiter of this process is woken, one of another process that blocked on
// the wake lock first sleeps on, and the wake lock stays on the
// connection that held it, so that the waiter's holding keeps it. Once
// this process has no waiter left, a release wakes the other process's;
// and so does a waiter handed the wake lock that makes no attempt.
func TestReleaseHandsOverInProcessMariaDB(t *testing.T) {
	dsn := testserver.StartMariaDB(t).DSN()
	for _, claim := range []bool{true, false} {
		t.Run(map[bool]string{true: "claimed", false: "unclaimed"}[claim], func(t *testing.T) {
			checkHandOver(t, dsn, "hand-over-"+strconv.FormatBool(claim), claim)
		})
	}
}

func checkHandOver(t *testing.T, dsn, key string, claim bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	here := &localHub{watches: make(watchSet[*localWatch])}
	backend := func(h *localHub) *Backend {
		b := newOn(t, openDB(t, "mysql", dsn))
		b.pollFirst, b.pollCap = time.Hour, time.Hour
		b.turn = "5000000"
		b.prepareStatements()
		b.local = h
		return b
	}
	holder, local := backend(here), backend(here)
	remote := backend(&localHub{watches: make(watchSet[*localWatch])})
	first := waitedGrant(t, holder, key, "holder")
	watch := func(b *Backend, owner string) (driver.Watch, driver.Lease) {
		t.Helper()
		l := driver.Lease{Key: key, Owner: owner}
		if g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || g.Acquired {
			t.Fatalf("%s: Acquire: %+v, %v; want refused", owner, g, err)
		}
		w, err := b.Watch(ctx, key, "")
		if err != nil {
			t.Fatalf("%s: Watch: %v", owner, err)
		}
		t.Cleanup(func() { w.Close() })
		time.Sleep(500 * time.Millisecond) // its gate blocks on the wake lock
		return w, l
	}
	rw, rl := watch(remote, "remote")
	lw, ll := watch(local, "local")
	probe := openDB(t, "mysql", dsn)
	wakeHolder := func() int64 {
		t.Helper()
		var id sql.NullInt64
		if err := probe.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, wakeLockName(holder.table, key)).Scan(&id); err != nil {
			t.Fatalf("IS_USED_LOCK: %v", err)
		}
		return id.Int64
	}
	kept := wakeHolder()
	if kept == 0 {
		t.Fatalf("the holder that waited keeps no wake lock")
	}
	if err := holder.Release(ctx, first); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-lw.C():
	case <-rw.C():
		t.Fatalf("the release woke the waiter of another process; want this process's")
	case <-time.After(10 * time.Second):
		t.Fatalf("the release woke no waiter of this process")
	}
	if !claim {
		// The waiter woken gives up: the other process's is woken.
		select {
		case <-rw.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiter handed the wake lock made no attempt, and the other process's was not woken")
		}
		if g, err := remote.Acquire(ctx, driver.Request{Lease: rl, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("the other process's attempt: %+v, %v; want granted", g, err)
		}
		return
	}
	if g, err := local.Acquire(ctx, driver.Request{Lease: ll, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("the woken waiter's attempt: %+v, %v; want granted", g, err)
	}
	lw.Close()
	if got := wakeHolder(); got != kept {
		t.Fatalf("the wake lock is on connection %d after the hand-over; want %d, where it was: let go of in the server", got, kept)
	}
	select {
	case <-rw.C():
		t.Fatalf("the other process's waiter was woken while the key changed hands in this one")
	case <-time.After(500 * time.Millisecond):
	}
	if err := local.Release(ctx, ll); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-rw.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("with no waiter left in this process, a release did not wake the other process's")
	}
	if g, err := remote.Acquire(ctx, driver.Request{Lease: rl, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("the other process's attempt: %+v, %v; want granted", g, err)
	}
	if err := remote.Release(ctx, rl); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// waitedGrant grants key to owner on b as to a holder that waited for it:
// its watch is in place when the grant comes.
func waitedGrant(t *testing.T, b *Backend, key, owner string) driver.Lease {
	t.Helper()
	ctx := context.Background()
	hw, err := b.Watch(ctx, key, "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer hw.Close()
	l := driver.Lease{Key: key, Owner: owner}
	if g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	return l
}
