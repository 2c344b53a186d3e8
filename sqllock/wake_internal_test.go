package sqllock

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
)

// openDB opens a pool, closed at the end of t.
func openDB(t *testing.T, drv, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(drv, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", drv, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newOn returns a backend on db, closed at the end of t.
func newOn(t *testing.T, db *sql.DB, opts ...Option) *Backend {
	t.Helper()
	b, err := New(db, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// checkWokenByRelease: a watch made through one backend is woken by a
// release, and by a Break, made through another backend of this process on
// its own pool, with the watch's poll set so far apart that only a direct
// wake-up can come in time; a release of another key does not wake it.
func checkWokenByRelease(t *testing.T, drv, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waiter := newOn(t, openDB(t, drv, dsn), WithListener(nil))
	waiter.pollFirst, waiter.pollCap = time.Hour, time.Hour
	holder := newOn(t, openDB(t, drv, dsn), WithListener(nil))
	if !waiter.Capabilities().Notify {
		t.Fatalf("Capabilities().Notify = false; want waiters woken")
	}
	w, err := waiter.Watch(ctx, "woken", "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	cycle := func(key string, end func(driver.Lease) error) {
		t.Helper()
		l := driver.Lease{Key: key, Owner: "holder"}
		if g, err := holder.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("Acquire %q: %+v, %v", key, g, err)
		}
		if err := end(l); err != nil {
			t.Fatalf("ending the hold of %q: %v", key, err)
		}
	}
	woken := func(d time.Duration) bool {
		select {
		case <-w.C():
			return true
		case <-time.After(d):
			return false
		}
	}
	release := func(l driver.Lease) error { return holder.Release(ctx, l) }
	cycle("other", release)
	if woken(300 * time.Millisecond) {
		t.Errorf("a release of another key woke the watch")
	}
	cycle("woken", release)
	if !woken(10 * time.Second) {
		t.Fatalf("a release in this process not heard within 10s")
	}
	cycle("woken", func(l driver.Lease) error { _, err := holder.Break(ctx, l.Key); return err })
	if !woken(10 * time.Second) {
		t.Fatalf("a Break in this process not heard within 10s")
	}
}

func TestWokenByReleaseSQLite(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "locks.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	checkWokenByRelease(t, "sqlite", dsn)
}

func TestWokenByReleaseMariaDB(t *testing.T) {
	checkWokenByRelease(t, "mysql", testserver.StartMariaDB(t).DSN())
}

func TestWokenByReleasePostgresWithoutListener(t *testing.T) {
	checkWokenByRelease(t, "pgx", testserver.StartPostgres(t).URL())
}

// TestPgxListensByDefault: a backend on a pool of pgx's driver listens for
// notifications without being told to, and hears a release made by a
// backend on another pool, with no poll to help; on a pool of one
// connection, which has none to spare, it watches all the same.
func TestPgxListensByDefault(t *testing.T) {
	url := testserver.StartPostgres(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waiter := newOn(t, openDB(t, "pgx", url))
	waiter.pollFirst, waiter.pollCap = time.Hour, time.Hour
	if !waiter.Capabilities().Notify || !waiter.autoListen {
		t.Fatalf("Notify %v, listening %v; want a listener of its own on pgx", waiter.Capabilities().Notify, waiter.autoListen)
	}
	// The releaser's hub is another: a process apart, as far as the
	// direct wake-up goes.
	releaser := newOn(t, openDB(t, "pgx", url), WithTable("distlock_leases"))
	w, err := waiter.Watch(ctx, "notified", "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	releaser.local = &localHub{watches: map[string]map[*localWatch]struct{}{}}
	l := driver.Lease{Key: "notified", Owner: "holder"}
	if g, err := releaser.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if err := releaser.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("a release not notified within 10s")
	}

	one := openDB(t, "pgx", url)
	one.SetMaxOpenConns(1)
	small := newOn(t, one)
	ws, err := small.Watch(ctx, "notified", "")
	if err != nil {
		t.Fatalf("Watch on a pool of one connection: %v", err)
	}
	ws.Close()
	g, err := small.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute})
	if err == nil && !g.Acquired && g.RetryAfter <= 25*time.Millisecond {
		// The release above named the waiter's listener, whose turn
		// this is (see marks.go): it ends within 20ms.
		time.Sleep(g.RetryAfter)
		g, err = small.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute})
	}
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire after a watch on a pool of one connection: %+v, %v", g, err)
	}
}
