package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// killHolder ends, on the server, the connection that holds key's native
// lock, as an operator's pg_terminate_backend or KILL would, and waits
// until the lock is free. It reports whether a connection held it.
func (d database) killHolder(t testing.TB, admin *sql.DB, key string) bool {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	if d.driver == "pgx" {
		k := uint64(sqllock.AdvisoryLockKey(key))
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND classid::BIGINT = $1 AND objid::BIGINT = $2`,
			int64(k>>32), int64(k&0xffffffff)).Scan(&n)
		if err != nil {
			t.Fatalf("pg_terminate_backend: %v", err)
		}
		return n > 0
	}
	name := sqllock.NativeLockName(key)
	var id sql.NullInt64
	if err := admin.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, name).Scan(&id); err != nil {
		t.Fatalf("IS_USED_LOCK: %v", err)
	}
	if !id.Valid {
		return false
	}
	if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id.Int64); err != nil {
		t.Fatalf("KILL CONNECTION %d: %v", id.Int64, err)
	}
	for {
		var free bool
		if err := admin.QueryRowContext(ctx, `SELECT IS_FREE_LOCK(?) = 1`, name).Scan(&free); err != nil {
			t.Fatalf("IS_FREE_LOCK: %v", err)
		}
		if free {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connHarness runs the suite on connection-scoped backends; Expire kills
// the holder's connection.
func (d database) connHarness(t *testing.T, opts ...sqllock.Option) distlocktest.Harness {
	admin := d.open(t)
	opts = append([]sqllock.Option{sqllock.WithConnectionScope()}, opts...)
	return distlocktest.Harness{
		NewBackend: func(t testing.TB) driver.Backend { return d.backend(t, opts...) },
		Expire:     func(t testing.TB, key string) { d.killHolder(t, admin, key) },
		// MariaDB's idle limit is whole seconds: a 500ms lease lasts up
		// to 1s on the server.
		TTL:     500 * time.Millisecond,
		Stored:  func(t testing.TB, prefix string) []string { return d.stored(t, admin, prefix) },
		Reclaim: 40 * time.Second,
	}
}

func TestConformancePostgresConnScope(t *testing.T) {
	_, d := startPostgres(t)
	distlocktest.Run(t, d.connHarness(t))
}

func TestConformanceMariaDBConnScope(t *testing.T) {
	_, d := startMariaDB(t)
	distlocktest.Run(t, d.connHarness(t))
}

// eachServer runs f on PostgreSQL and MariaDB.
func eachServer(t *testing.T, f func(t *testing.T, d database)) {
	t.Run("postgres", func(t *testing.T) { _, d := startPostgres(t); f(t, d) })
	t.Run("mariadb", func(t *testing.T) { _, d := startMariaDB(t); f(t, d) })
}

// TestConnScopeKilledConnection: killing the holder's connection on the
// server ends its handle within the loss check, long before the TTL, and
// another client takes the key at once with a higher token, while the old
// holder's Unlock reports the loss and frees nothing.
func TestConnScopeKilledConnection(t *testing.T) {
	eachServer(t, func(t *testing.T, d database) {
		const ttl = time.Minute
		key := "killed"
		holder := lock(t, distlock.New(d.backend(t, sqllock.WithConnectionScope(), sqllock.WithLossCheck(50*time.Millisecond)), distlock.WithTTL(ttl)).Mutex(key))
		other := distlock.New(d.backend(t, sqllock.WithConnectionScope()), distlock.WithTTL(ttl)).Mutex(key)
		if l, err := other.TryLock(ctxFor(t, 5*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
			if l != nil {
				l.Unlock(context.Background())
			}
			t.Fatalf("TryLock of a held key: %v", err)
		}
		if !d.killHolder(t, d.open(t), key) {
			t.Fatalf("no connection held the native lock of %q", key)
		}
		killed := time.Now()
		select {
		case <-holder.Done():
			if !errors.Is(holder.Err(), distlock.ErrLockLost) {
				t.Errorf("holder's Err() = %v; want ErrLockLost", holder.Err())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("holder's Done still open 5s after its connection was killed (TTL %v)", ttl)
		}
		t.Logf("handle ended %v after the kill", time.Since(killed))
		l, err := other.TryLock(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatalf("TryLock after the holder's connection was killed: %v", err)
		}
		defer l.Unlock(context.Background())
		if l.Token() <= holder.Token() {
			t.Errorf("token %d after the kill; want above the lost holder's %d", l.Token(), holder.Token())
		}
		if err := holder.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("Unlock by the killed holder: %v; want ErrLockLost", err)
		}
		if l2, err := other.TryLock(ctxFor(t, 5*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
			if l2 != nil {
				l2.Unlock(context.Background())
			}
			t.Errorf("the killed holder's Unlock freed the new holder's lock: %v", err)
		}
	})
}

// TestConnScopeStalledHolder: a holder that stops renewing (stalled, cut
// off) is disconnected by the server once its connection has been idle
// for the TTL, which frees the lock; nothing on the holder's side acts.
func TestConnScopeStalledHolder(t *testing.T) {
	eachServer(t, func(t *testing.T, d database) {
		const ttl = time.Second
		key := "stalled"
		b := d.backend(t, sqllock.WithConnectionScope())
		ctx := ctxFor(t, 20*time.Second)
		g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "stalled-holder"}, TTL: ttl})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		// Renewals stop here. Another backend gets in once the server
		// has ended the idle connection.
		other := d.backend(t, sqllock.WithConnectionScope())
		req := driver.Request{Lease: driver.Lease{Key: key, Owner: "next-holder"}, TTL: time.Minute}
		start := time.Now()
		for {
			g2, err := other.Acquire(ctx, req)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if g2.Acquired {
				if el := time.Since(start); el < ttl/2 {
					t.Errorf("taken over %v after the last statement; want no sooner than the TTL %v", el, ttl)
				}
				if g2.Token <= g.Token {
					t.Errorf("token %d; want above the stalled holder's %d", g2.Token, g.Token)
				}
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the stalled holder's lock (TTL %v) still held after %v", ttl, time.Since(start))
			}
			time.Sleep(50 * time.Millisecond)
		}
		select {
		case <-g.Lost:
		case <-time.After(5 * time.Second):
			t.Errorf("the stalled holding's Lost channel not closed after the server ended its connection")
		}
	})
}

func TestConnScopeOptions(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/x.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqllock.New(db, sqllock.WithConnectionScope()); err == nil {
		t.Errorf("WithConnectionScope on SQLite accepted")
	}
	if _, err := sqllock.New(db, sqllock.WithDialect(sqllock.Postgres), sqllock.WithConnectionScope(), sqllock.WithLossCheck(0)); err == nil {
		t.Errorf("WithLossCheck(0) accepted")
	}
	if a, b := sqllock.AdvisoryLockKey("k"), sqllock.AdvisoryLockKey("k2"); a == b {
		t.Errorf("AdvisoryLockKey: two keys share %d", a)
	}
	if n := sqllock.NativeLockName(string(make([]byte, 1024))); len(n) > 64 {
		t.Errorf("NativeLockName is %d characters; MySQL takes 64", len(n))
	}
}

// TestConnScopeReleaseNotifies: the release of a connection-scoped lock by
// a backend without a listener wakes the watch of another process's
// backend that has one, as table-mode releases do.
func TestConnScopeReleaseNotifies(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 30*time.Second)
	db := d.open(t)
	waiter := d.backendOn(t, db, sqllock.WithConnectionScope(), sqllock.WithListener(pglisten.New(db)))
	holder := d.backend(t, sqllock.WithConnectionScope())
	l := driver.Lease{Key: "conn-notify", Owner: "holder"}
	if g, err := holder.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	w := watchListening(t, ctx, waiter, l.Key)
	if err := holder.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !woken(w, 5*time.Second) {
		t.Fatalf("the release of a connection-scoped lock by a backend without a listener not heard within 5s")
	}
}

// TestConnScopeCloseTwice: Close is idempotent after the backend has held
// a lock, when its loss check has run: the second Close does nothing and
// returns nil.
func TestConnScopeCloseTwice(t *testing.T) {
	eachServer(t, func(t *testing.T, d database) {
		b, err := sqllock.New(d.open(t), sqllock.WithConnectionScope())
		if err != nil {
			t.Fatalf("sqllock.New: %v", err)
		}
		ctx := ctxFor(t, 10*time.Second)
		l := driver.Lease{Key: "close-twice", Owner: "holder"}
		if g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("second Close panicked: %v", r)
			}
		}()
		if err := b.Close(); err != nil {
			t.Errorf("second Close: %v; want nil", err)
		}
	})
}

// TestConnScopeAfterReadLock: a key last taken as a read-write lock in the
// lease table is taken by a connection-scoped backend once the read lock
// ends, with a larger token (the row is settled back to a mutex's first).
func TestConnScopeAfterReadLock(t *testing.T) {
	for _, db := range []string{"postgres", "mariadb"} {
		t.Run(db, func(t *testing.T) {
			var d database
			if db == "postgres" {
				_, d = startPostgres(t)
			} else {
				_, d = startMariaDB(t)
			}
			ctx := context.Background()
			table, conns := d.backend(t), d.backend(t, sqllock.WithConnectionScope())
			read := driver.Lease{Key: "mixed", Owner: "reader", Kind: driver.Read}
			g, err := table.Acquire(ctx, driver.Request{Lease: read, TTL: time.Minute})
			if err != nil || !g.Acquired {
				t.Fatalf("read lock: %+v, %v", g, err)
			}
			if err := table.Release(ctx, read); err != nil {
				t.Fatalf("read unlock: %v", err)
			}
			l := driver.Lease{Key: "mixed", Owner: "conn"}
			c, err := conns.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute})
			if err != nil || !c.Acquired {
				t.Fatalf("connection-scoped lock after the read lock: %+v, %v", c, err)
			}
			if c.Token <= g.Token {
				t.Errorf("token %d after the read lock's %d: want larger", c.Token, g.Token)
			}
			if err := conns.Release(ctx, l); err != nil {
				t.Fatalf("unlock: %v", err)
			}
		})
	}
}
