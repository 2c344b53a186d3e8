package sqllock_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// database is one test database: how to open a pool on it.
type database struct {
	driver, dsn string
}

func startPostgres(t testing.TB) (*testserver.Postgres, database) {
	srv := testserver.StartPostgres(t)
	return srv, database{"pgx", srv.URL()}
}

func startMariaDB(t testing.TB) (*testserver.MariaDB, database) {
	srv := testserver.StartMariaDB(t)
	return srv, database{"mysql", srv.DSN()}
}

// sqliteFile is a database file shared by several pools, as by several
// processes: WAL, and a busy timeout so that writers queue.
func sqliteFile(t testing.TB) database {
	path := filepath.Join(t.TempDir(), "locks.db")
	return database{"sqlite", "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"}
}

// open returns a new pool on d, closed at the end of the test.
func (d database) open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", d.driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// backend returns a backend on a new pool on d.
func (d database) backend(t testing.TB, opts ...sqllock.Option) *sqllock.Backend {
	t.Helper()
	return d.backendOn(t, d.open(t), opts...)
}

// backendOn returns a backend on db.
func (d database) backendOn(t testing.TB, db *sql.DB, opts ...sqllock.Option) *sqllock.Backend {
	t.Helper()
	b, err := sqllock.New(db, opts...)
	if err != nil {
		t.Fatalf("sqllock.New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// expire ends key's lease behind its holder's back.
func (d database) expire(t testing.TB, db *sql.DB, key string) {
	t.Helper()
	for _, table := range []string{sqllock.DefaultTable, sqllock.DefaultTable + "_holds"} {
		q := "UPDATE " + table + " SET expires_us = 0 WHERE name = ?"
		if d.driver == "pgx" {
			q = "UPDATE " + table + " SET expires_us = 0 WHERE name = $1"
		}
		if _, err := db.ExecContext(context.Background(), q, key); err != nil {
			t.Fatalf("expire %q: %v", key, err)
		}
	}
}

func (d database) harness(t *testing.T) distlocktest.Harness {
	admin := d.open(t)
	return distlocktest.Harness{
		NewBackend: func(t testing.TB) driver.Backend { return d.backend(t) },
		Expire:     func(t testing.TB, key string) { d.expire(t, admin, key) },
		TTL:        500 * time.Millisecond,
		Stored:     func(t testing.TB, prefix string) []string { return d.stored(t, admin, prefix) },
		// A free key's row stays for 10s, then goes at the next sweep.
		Reclaim: 40 * time.Second,
	}
}

func TestConformancePostgres(t *testing.T) {
	_, d := startPostgres(t)
	distlocktest.Run(t, d.harness(t))
}

func TestConformancePostgresNotify(t *testing.T) {
	_, d := startPostgres(t)
	h := d.harness(t)
	h.NewBackend = func(t testing.TB) driver.Backend { return d.listening(t) }
	distlocktest.Run(t, h)
}

// listening returns a backend on a new pool on d that waits for
// notifications.
func (d database) listening(t testing.TB) *sqllock.Backend {
	db := d.open(t)
	return d.backendOn(t, db, sqllock.WithListener(pglisten.New(db)))
}

func TestConformanceMariaDB(t *testing.T) {
	_, d := startMariaDB(t)
	distlocktest.Run(t, d.harness(t))
}

// TestConformanceSQLite runs the suite with its clients spread over three
// processes sharing the database file: this one and two helpers (see
// process_test.go), in turn.
func TestConformanceSQLite(t *testing.T) {
	d := sqliteFile(t)
	h := d.harness(t)
	// One writer at a time across three processes: a renewal may wait
	// behind another process's write, so leases get more room.
	h.TTL = time.Second
	helpers := []*helperProcess{startHelper(t, d), startHelper(t, d)}
	var mu sync.Mutex
	n := 0
	h.NewBackend = func(t testing.TB) driver.Backend {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i%3 == 0 {
			return d.backend(t)
		}
		return helpers[i%3-1].backend(t)
	}
	distlocktest.Run(t, h)
}
