package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/sqllock"
)

// TestConnScopeRestartReusesConnectionID: MariaDB numbers connections
// from the start again after a restart. When another client's connection
// gets the id the dead holder's had and takes the key's native lock, the
// dead holding still ends within its loss check: the check asks for the
// connection that holds the holding's own mark, not for an id.
func TestConnScopeRestartReusesConnectionID(t *testing.T) {
	srv, d := startMariaDB(t)
	const lossCheck = 8 * time.Second
	key := "restart-reuse"
	ctx := ctxFor(t, 2*time.Minute)
	// Connections before the holder's, so that its id is one the
	// restarted server reaches again.
	spare := d.open(t)
	var pinned []*sql.Conn
	for range 8 {
		c, err := spare.Conn(ctx)
		if err != nil {
			t.Fatalf("Conn: %v", err)
		}
		pinned = append(pinned, c)
	}
	b := d.backend(t, sqllock.WithConnectionScope(), sqllock.WithLossCheck(lossCheck))
	g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "dead-holder"}, TTL: 5 * time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	for _, c := range pinned {
		c.Close()
	}
	var id int64
	if err := d.open(t).QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, sqllock.NativeLockName(key)).Scan(&id); err != nil {
		t.Fatalf("IS_USED_LOCK: %v", err)
	}
	srv.Restart()
	restarted := time.Now()
	// A client whose connection gets the dead holder's id takes the lock.
	other := d.open(t)
	var conn *sql.Conn
	for conn == nil {
		c, err := other.Conn(ctx)
		if err != nil {
			t.Fatalf("Conn after the restart: %v", err)
		}
		var got int64
		if err := c.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&got); err != nil {
			t.Fatalf("CONNECTION_ID: %v", err)
		}
		switch {
		case got == id:
			conn = c
		case got > id:
			t.Fatalf("after the restart, connection ids passed %d (the holder's) before this test reached it", id)
		}
	}
	defer conn.Close()
	var locked int
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0)`, sqllock.NativeLockName(key)).Scan(&locked); err != nil || locked != 1 {
		t.Fatalf("GET_LOCK on the connection with the reused id %d: %d, %v", id, locked, err)
	}
	select {
	case <-g.Lost:
		t.Logf("the dead holding ended %v after the restart", time.Since(restarted))
	case <-time.After(lossCheck + 15*time.Second):
		t.Fatalf("the holding of a restarted server still open %v after the restart, while connection %d (its old id) holds the lock", time.Since(restarted), id)
	}
}

// proxiedPostgres returns a connection-scoped backend whose pool reaches
// srv through a new proxy, with the simple protocol, so that each
// statement is one message whose text the proxy can match.
func proxiedPostgres(t *testing.T, srv *testserver.Postgres, opts ...sqllock.Option) (*sqllock.Backend, *testserver.Proxy) {
	t.Helper()
	proxy := testserver.StartProxy(t, srv.Addr())
	dsn := strings.Replace(srv.URL(), srv.Addr(), proxy.Addr(), 1) + "&default_query_exec_mode=simple_protocol"
	d := database{"pgx", dsn}
	return d.backend(t, append([]sqllock.Option{sqllock.WithConnectionScope()}, opts...)...), proxy
}

// TestConnScopeReleaseReplyLost: a release whose statement committed but
// whose reply was lost with the connection is recognised as done: Unlock
// returns nil, not ErrLockLost, and the key is free.
func TestConnScopeReleaseReplyLost(t *testing.T) {
	srv, d := startPostgres(t)
	b, proxy := proxiedPostgres(t, srv)
	key := "release-reply-lost"
	l := lock(t, distlock.New(b, distlock.WithTTL(time.Minute)).Mutex(key))
	dropped := proxy.DropReply("pg_advisory_unlock")
	if err := l.Unlock(ctxFor(t, 20*time.Second)); err != nil {
		t.Errorf("Unlock whose committed release lost its reply: %v; want nil", err)
	}
	select {
	case <-dropped:
	default:
		t.Fatalf("the release's reply was not dropped")
	}
	l2, err := distlock.New(d.backend(t, sqllock.WithConnectionScope())).Mutex(key).TryLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	l2.Unlock(context.Background())
}

// TestConnScopeCancelledRenewal: a renewal cancelled in flight, as
// Unlock cancels one it no longer needs, does not end the holding: the
// renewal completes, the holding is not reported lost, and the release
// that follows on the same connection succeeds. Another transaction's
// lock on the key's row keeps the renewal in flight.
func TestConnScopeCancelledRenewal(t *testing.T) {
	eachServer(t, func(t *testing.T, d database) {
		key := "cancelled-renewal"
		b := d.backend(t, sqllock.WithConnectionScope())
		ctx := ctxFor(t, time.Minute)
		lease := driver.Lease{Key: key, Owner: "holder"}
		g, err := b.Acquire(ctx, driver.Request{Lease: lease, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		admin := d.open(t)
		tx, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("BEGIN: %v", err)
		}
		defer tx.Rollback()
		q, waiting := "SELECT 1 FROM distlock_leases WHERE name = ? FOR UPDATE",
			"SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'UPDATE distlock_leases SET expires_us%'"
		if d.driver == "pgx" {
			q, waiting = "SELECT 1 FROM distlock_leases WHERE name = $1 FOR UPDATE",
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idle_session_timeout%'"
		}
		if _, err := tx.ExecContext(ctx, q, key); err != nil {
			t.Fatalf("locking the key's row: %v", err)
		}
		renewCtx, cancel := context.WithCancel(ctx)
		renewed := make(chan error, 1)
		go func() {
			_, err := b.Refresh(renewCtx, lease, time.Minute)
			renewed <- err
		}()
		for n := 0; n == 0; time.Sleep(20 * time.Millisecond) {
			if err := admin.QueryRowContext(ctx, waiting).Scan(&n); err != nil {
				t.Fatalf("%s: %v", waiting, err)
			}
		}
		cancel()
		released := make(chan error, 1)
		go func() { released <- b.Release(ctx, lease) }()
		// The row comes free a moment after the cancellation.
		time.Sleep(300 * time.Millisecond)
		tx.Rollback()
		if err := <-renewed; err != nil {
			t.Logf("the cancelled renewal: %v", err)
		}
		if err := <-released; err != nil {
			t.Errorf("Release after a renewal cancelled in flight: %v; want nil", err)
		}
		select {
		case <-g.Lost:
			t.Errorf("the holding was reported lost after a renewal cancelled in flight")
		default:
		}
	})
}

// TestReleaseOnBusySQLiteFile: a release that meets another connection's
// write transaction on the SQLite file for a little longer than the busy
// timeout fails once; the release is repeated, Unlock returns nil and the
// key is free.
func TestReleaseOnBusySQLiteFile(t *testing.T) {
	d := sqliteFile(t)
	d.dsn = strings.Replace(d.dsn, "busy_timeout(10000)", "busy_timeout(1000)", 1)
	const busy = 1500 * time.Millisecond
	key := "busy-release"
	c := distlock.New(d.backend(t), distlock.WithTTL(time.Minute))
	l := lock(t, c.Mutex(key))
	blockerDB := d.open(t)
	if _, err := blockerDB.Exec(`CREATE TABLE blocker (x INTEGER)`); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	tx, err := blockerDB.Begin()
	if err != nil {
		t.Fatalf("BEGIN: %v", err)
	}
	if _, err := tx.Exec(`INSERT INTO blocker VALUES (1)`); err != nil {
		t.Fatalf("INSERT in the blocking transaction: %v", err)
	}
	time.AfterFunc(busy, func() { tx.Rollback() })
	if err := l.Unlock(ctxFor(t, 20*time.Second)); err != nil {
		t.Errorf("Unlock while the file was busy for %v (busy timeout 1s): %v; want nil", busy, err)
	}
	l2, err := c.Mutex(key).TryLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the Unlock: %v", err)
	}
	l2.Unlock(context.Background())
	if errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("the key is still held after Unlock")
	}
}

// TestReleaseBusyPromptAndRepeatable: a release that meets a busy SQLite
// file returns its error when its context ends, not after the busy
// timeout, and having changed nothing, it can be made again: the repeat
// releases the key.
func TestReleaseBusyPromptAndRepeatable(t *testing.T) {
	d := sqliteFile(t) // busy timeout 10s
	b := d.backend(t)
	ctx := ctxFor(t, time.Minute)
	lease := driver.Lease{Key: "busy-prompt", Owner: "holder"}
	if g, err := b.Acquire(ctx, driver.Request{Lease: lease, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	blockerDB := d.open(t)
	if _, err := blockerDB.Exec(`CREATE TABLE blocker (x INTEGER)`); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	tx, err := blockerDB.Begin()
	if err != nil {
		t.Fatalf("BEGIN: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO blocker VALUES (1)`); err != nil {
		t.Fatalf("INSERT in the blocking transaction: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.Release(short, lease); err == nil {
		t.Fatalf("Release while the file is busy: nil; want an error")
	}
	// Within the busy timeout (10s) by far, however loaded the machine.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Release with a 300ms context on a busy file returned after %v", took)
	}
	tx.Rollback()
	if err := b.Release(ctx, lease); err != nil {
		t.Fatalf("Release repeated once the file is free: %v", err)
	}
	if info, err := b.Inspect(ctx, lease.Key); err != nil || info.Held {
		t.Errorf("Inspect after the repeated release: %+v, %v; want free", info, err)
	}
}
