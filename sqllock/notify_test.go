package sqllock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// woken waits up to d for a wake-up of w.
func woken(w driver.Watch, d time.Duration) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(d):
		return false
	}
}

// listeners counts the server's connections that listen for sqllock.
func listeners(t *testing.T, d database) int {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN "distlock_%' AND pid <> pg_backend_pid()`
	if err := d.open(t).QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("counting listeners: %v", err)
	}
	return n
}

// TestNotifyAcrossReconnect: a watch hears a release made by another
// backend; when the listening connection is killed, the backend listens
// again on a new one and wakes every watch (releases may have been missed
// meanwhile); releases are heard again after that; Close stops listening.
func TestNotifyAcrossReconnect(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 60*time.Second)
	b := d.listening(t)
	if !b.Capabilities().Notify {
		t.Fatalf("Capabilities().Notify = false with a listener")
	}
	other := d.backend(t) // no listener: its releases notify all the same
	cycle := func(key string) {
		t.Helper()
		l := driver.Lease{Key: key, Owner: "releaser"}
		if g, err := other.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if err := other.Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	w, err := b.Watch(ctx, "watched", "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	quiet, err := b.Watch(ctx, "quiet", "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer quiet.Close()
	cycle("watched") // at once: the watch is in place when Watch returns
	if !woken(w, 5*time.Second) {
		t.Fatalf("a release by another backend not heard within 5s")
	}
	if woken(quiet, 200*time.Millisecond) {
		t.Errorf("a release of another key woke a watch")
	}

	if n := listeners(t, d); n != 1 {
		t.Fatalf("%d listening connections; want 1 for the backend", n)
	}
	kill := `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN "distlock_%' AND pid <> pg_backend_pid()`
	if _, err := d.open(t).ExecContext(ctx, kill); err != nil {
		t.Fatalf("terminating the listener: %v", err)
	}
	for name, w := range map[string]driver.Watch{"watched": w, "quiet": quiet} {
		if !woken(w, 10*time.Second) {
			t.Fatalf("watch of %q not woken within 10s of the listener's reconnect", name)
		}
	}
	cycle("watched")
	if !woken(w, 5*time.Second) {
		t.Fatalf("a release after the reconnect not heard within 5s")
	}

	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for end := time.Now().Add(10 * time.Second); listeners(t, d) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a connection still listens 10s after Close")
		}
	}
	if _, err := b.Watch(ctx, "watched", ""); err == nil {
		t.Errorf("Watch after Close: no error")
	}
}

func TestListenerNeedsPostgres(t *testing.T) {
	db := sqliteFile(t).open(t)
	if _, err := sqllock.New(db, sqllock.WithListener(pglisten.New(db))); err == nil {
		t.Errorf("New on SQLite with a listener: no error")
	}
}

// notifyWithin is how soon a notified release must wake a watch: well
// under distlock's safety poll of a second, which is all that wakes a
// waiter that no notice reaches.
const notifyWithin = 500 * time.Millisecond

// TestBreakSharedNotifies: Break of a read-write lock or a semaphore,
// whose holds live in the holds table, wakes the watches of its key at
// once, as Break of a mutex does.
func TestBreakSharedNotifies(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 30*time.Second)
	waiter := d.listening(t)
	admin := d.backend(t) // no listener: its Break notifies all the same
	for _, tc := range []struct {
		name  string
		kinds []driver.Kind
	}{
		{"writer", []driver.Kind{driver.Write}},
		{"readers", []driver.Kind{driver.Read, driver.Read}},
		{"permits", []driver.Kind{driver.Permit, driver.Permit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "broken-" + tc.name
			for i, kind := range tc.kinds {
				req := driver.Request{Lease: driver.Lease{Key: key, Owner: "holder-" + strconv.Itoa(i), Kind: kind}, TTL: time.Minute, Limit: 2}
				if g, err := admin.Acquire(ctx, req); err != nil || !g.Acquired {
					t.Fatalf("Acquire %d: %+v, %v", i, g, err)
				}
			}
			w := watchListening(t, ctx, waiter, key)
			if info, err := admin.Break(ctx, key); err != nil || !info.Held {
				t.Fatalf("Break: %+v, %v; want the holding it ended", info, err)
			}
			if !woken(w, notifyWithin) {
				t.Fatalf("Break of %s not heard within %v", tc.name, notifyWithin)
			}
		})
	}
}

// TestWithdrawnClaimNotifies: a waiting writer that gives up withdraws its
// claim, which lets the readers it kept out in: their watches wake at once.
func TestWithdrawnClaimNotifies(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 30*time.Second)
	waiter := d.listening(t)
	other := d.backend(t)
	key := "withdrawn"
	reader := driver.Request{Lease: driver.Lease{Key: key, Owner: "reader", Kind: driver.Read}, TTL: time.Minute}
	if g, err := other.Acquire(ctx, reader); err != nil || !g.Acquired {
		t.Fatalf("Acquire of the reader: %+v, %v", g, err)
	}
	writer := driver.Request{Lease: driver.Lease{Key: key, Owner: "writer", Kind: driver.Write}, TTL: time.Minute, Queue: time.Minute}
	if g, err := other.Acquire(ctx, writer); err != nil || g.Acquired {
		t.Fatalf("Acquire of the writer while a reader holds: %+v, %v; want refused", g, err)
	}
	w := watchListening(t, ctx, waiter, key)
	if err := other.Release(ctx, writer.Lease); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of the waiting writer: %v", err)
	}
	if !woken(w, notifyWithin) {
		t.Fatalf("the withdrawal of a writer's claim not heard within %v", notifyWithin)
	}
}

// TestReleaseNotifiesWaitersOnly: a release of a key that no waiter
// watches sends no notification (pg_notify costs about as much as the
// release itself); once a waiter in another backend watches the key, its
// release notifies it. Both for the lease table and connection-scoped
// locks. A notification sent after a release commits is delivered after
// any the release sent, so a sentinel tells that none was.
func TestReleaseNotifiesWaitersOnly(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 90*time.Second)
	heard := make(chan string, 64)
	ready := make(chan struct{}, 1)
	lctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = pglisten.New(d.open(t)).Listen(lctx, "distlock_"+sqllock.DefaultTable,
			func() {
				select {
				case ready <- struct{}{}:
				default:
				}
			},
			func(p string) { heard <- p })
	}()
	t.Cleanup(func() { stop(); <-stopped })
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("LISTEN: %v", ctx.Err())
	}
	admin := d.open(t)
	next := func() string {
		t.Helper()
		select {
		case p := <-heard:
			return p
		case <-ctx.Done():
			t.Fatalf("no notification: %v", ctx.Err())
			return ""
		}
	}
	for _, mode := range []struct {
		name string
		opts []sqllock.Option
	}{
		{"table", nil},
		{"connection-scoped", []sqllock.Option{sqllock.WithConnectionScope()}},
	} {
		holder := d.backend(t, append(mode.opts, sqllock.WithListener(nil))...)
		cycle := func(key string) {
			t.Helper()
			l := driver.Lease{Key: key, Owner: "holder"}
			if g, err := holder.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
				t.Fatalf("%s: Acquire(%q): %+v, %v", mode.name, key, g, err)
			}
			if err := holder.Release(ctx, l); err != nil {
				t.Fatalf("%s: Release(%q): %v", mode.name, key, err)
			}
		}
		sentinel := func(s string) {
			t.Helper()
			if _, err := admin.ExecContext(ctx, `SELECT pg_notify($1, $2)`, "distlock_"+sqllock.DefaultTable, s); err != nil {
				t.Fatalf("pg_notify: %v", err)
			}
		}
		unwatched, watched := mode.name+"-unwatched", mode.name+"-watched"
		cycle(unwatched)
		sentinel(mode.name + "-sentinel")
		if p := next(); p != mode.name+"-sentinel" {
			t.Fatalf("%s: a release that no waiter watched notified %q", mode.name, p)
		}
		w, err := d.backend(t).Watch(ctx, watched, "") // pgx: it listens by itself
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Close()
		cycle(watched)
		sentinel(mode.name + "-sentinel")
		// A mutex's release in the table names the listener whose turn
		// it is before the key (see TestReleaseWakesOneWaiter).
		if p := next(); p != watched && !(mode.name == "table" && strings.HasPrefix(p, ";") && strings.HasSuffix(p, ";"+watched)) {
			t.Fatalf("%s: the release of a watched key notified %q, want %q", mode.name, p, watched)
		}
		if p := next(); p != mode.name+"-sentinel" {
			t.Fatalf("%s: then %q, want the sentinel", mode.name, p)
		}
		if !woken(w, 30*time.Second) {
			t.Fatalf("%s: the waiter's watch was not woken by the release", mode.name)
		}
	}
}
