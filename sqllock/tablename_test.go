package sqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// exerciseTable runs every kind of statement of b against its table:
// exclusive, re-entrant and shared leases, refusals, repeats, Inspect,
// List and Break. Any SQL the table name broke shows as an error.
func exerciseTable(t *testing.T, b *sqllock.Backend) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	grant := func(req driver.Request) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire %+v: %+v, %v", req.Lease, g, err)
		}
		return g
	}
	ex := driver.Request{Lease: driver.Lease{Key: "x", Owner: "a"}, TTL: time.Minute}
	grant(ex)
	if g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "x", Owner: "b"}, TTL: time.Minute}); err != nil || g.Acquired {
		t.Fatalf("Acquire of a held key: %+v, %v", g, err)
	}
	_, err := b.Refresh(ctx, ex.Lease, time.Minute)
	must("Refresh", err)
	if info, err := b.Inspect(ctx, "x"); err != nil || !info.Held {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	must("Release", b.Release(ctx, ex.Lease))
	must("repeated Release", b.Release(ctx, ex.Lease))

	if b.Capabilities().Reentrant {
		re := driver.Request{Lease: driver.Lease{Key: "re", Owner: "r1"}, TTL: time.Minute, Reentry: "id"}
		grant(re)
		re2 := re
		re2.Owner = "r2"
		grant(re2)
		must("Release of a nested hold", b.Release(ctx, re2.Lease))
		must("Release", b.Release(ctx, re.Lease))
	}
	if b.Capabilities().ReadWrite {
		rd := driver.Request{Lease: driver.Lease{Key: "rw", Owner: "r", Kind: driver.Read}, TTL: time.Minute}
		grant(rd)
		wr := driver.Request{Lease: driver.Lease{Key: "rw", Owner: "w", Kind: driver.Write}, TTL: time.Minute, Queue: time.Minute}
		if g, err := b.Acquire(ctx, wr); err != nil || g.Acquired {
			t.Fatalf("Acquire of a write lock while read: %+v, %v", g, err)
		}
		if err := b.Release(ctx, wr.Lease); err != nil && !errors.Is(err, driver.ErrNotHeld) { // a claim is not a hold
			t.Fatalf("withdrawing the writer's claim: %v", err)
		}
		_, err := b.Refresh(ctx, rd.Lease, 2*time.Minute)
		must("Refresh of a read lock", err)
		_, err = b.Refresh(ctx, rd.Lease, 2*time.Minute) // the same expiry on MySQL
		must("second Refresh of a read lock", err)
		if info, err := b.Inspect(ctx, "rw"); err != nil || !info.Held || info.Kind != driver.Read {
			t.Fatalf("Inspect of a read lock: %+v, %v", info, err)
		}
		must("Release of a read lock", b.Release(ctx, rd.Lease))
		must("repeated Release of a read lock", b.Release(ctx, rd.Lease))
		grant(rd)
		if _, err := b.Break(ctx, "rw"); err != nil {
			t.Fatalf("Break of a read lock: %v", err)
		}
	}
	ex.Owner = "c" // not the last owner to release, whose repeat succeeds
	grant(ex)
	list, err := b.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Key != "x" {
		t.Fatalf("List: %+v, %v; want x alone", list, err)
	}
	if _, err := b.Break(ctx, "x"); err != nil {
		t.Fatalf("Break: %v", err)
	}
	if err := b.Release(ctx, ex.Lease); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release after Break: %v; want ErrNotHeld", err)
	}
}

// TestTableNameWithNOW: a table whose name contains NOW, the word the
// statements once used for the database clock, works on every dialect and
// in both modes.
func TestTableNameWithNOW(t *testing.T) {
	const table = "KNOWN_LOCKS"
	eachDatabase(t, func(t *testing.T, d database) {
		t.Run("table", func(t *testing.T) { exerciseTable(t, d.backend(t, sqllock.WithTable(table))) })
		if d.driver == "sqlite" {
			return
		}
		t.Run("connection", func(t *testing.T) {
			exerciseTable(t, d.backend(t, sqllock.WithTable(table), sqllock.WithConnectionScope()))
		})
		if d.driver == "pgx" {
			t.Run("listener", func(t *testing.T) { checkNotified(t, d, table) })
		}
	})
}

// checkNotified: a release by a backend without a listener on table wakes
// a watch of a backend with one.
func checkNotified(t *testing.T, d database, table string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	db := d.open(t)
	listening := d.backendOn(t, db, sqllock.WithTable(table), sqllock.WithListener(pglisten.New(db)))
	exerciseTable(t, listening)
	other := d.backend(t, sqllock.WithTable(table))
	w := watchListening(t, ctx, listening, "watched")
	l := driver.Lease{Key: "watched", Owner: "releaser"}
	if g, err := other.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if err := other.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !woken(w, 5*time.Second) {
		t.Fatalf("a release on table %s not heard within 5s", table)
	}
}

// TestLongTableName: a table name of the longest length allowed, whose
// "distlock_" channel would exceed PostgreSQL's 63-byte identifiers,
// works with notified waiting, schema-qualified too.
func TestLongTableName(t *testing.T) {
	table := strings.Repeat("l", 57)
	_, d := startPostgres(t)
	checkNotified(t, d, table)
	t.Run("schema-qualified", func(t *testing.T) {
		if _, err := d.open(t).ExecContext(ctxFor(t, 10*time.Second), "CREATE SCHEMA IF NOT EXISTS "+strings.Repeat("s", 57)); err != nil {
			t.Fatalf("CREATE SCHEMA: %v", err)
		}
		checkNotified(t, d, strings.Repeat("s", 57)+"."+table)
	})
}

// watchListening returns a watch of key on b, whose listener is already
// listening: the first Watch of a backend is woken when its listener
// starts, which would hide a notice that never came.
func watchListening(t *testing.T, ctx context.Context, b *sqllock.Backend, key string) driver.Watch {
	t.Helper()
	first, err := b.Watch(ctx, "listener-started", "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	first.Close()
	w, err := b.Watch(ctx, key, "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	if woken(w, 100*time.Millisecond) {
		t.Fatalf("a new watch of %q woken with nothing released", key)
	}
	return w
}
