package sqllock_test

import (
	"context"
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
