package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

func TestSchemaAndTableNames(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite} {
		ddl, err := sqllock.Schema(d, "app.locks_1")
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS app.locks_1 (") {
			t.Errorf("Schema(%s): %q, %v", d, ddl, err)
		}
	}
	if _, err := sqllock.Schema("oracle", "locks"); err == nil {
		t.Errorf("Schema of an unknown dialect: no error")
	}
	for _, bad := range []string{"", "1locks", "locks; DROP TABLE x", "a.b.c", "lo-cks", `"locks"`, strings.Repeat("a", 64)} {
		if _, err := sqllock.Schema(sqllock.Postgres, bad); err == nil {
			t.Errorf("Schema with table %q: no error", bad)
		}
		if _, err := sqllock.New(sqliteFile(t).open(t), sqllock.WithTable(bad)); err == nil {
			t.Errorf("New with table %q: no error", bad)
		}
	}
}

func TestDetectDialect(t *testing.T) {
	for drv, want := range map[string]sqllock.Dialect{"pgx": sqllock.Postgres, "mysql": sqllock.MySQL, "sqlite": sqllock.SQLite} {
		db, err := sql.Open(drv, "u@tcp(127.0.0.1:1)/db") // never connected
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sqllock.DetectDialect(db); got != want || err != nil {
			t.Errorf("DetectDialect(%s) = %q, %v; want %q", drv, got, err, want)
		}
		db.Close()
	}
	if _, err := sqllock.New(nil); err == nil {
		t.Errorf("New(nil): no error")
	}
}

// TestNoDriverDependency: package sqllock builds on database/sql alone;
// the drivers come with sqlurl, the CLI and tests only.
func TestNoDriverDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, drv := range []string{"jackc/pgx", "go-sql-driver", "modernc.org/sqlite", "redis/go-redis"} {
			if strings.Contains(dep, drv) {
				t.Errorf("sqllock depends on %s", dep)
			}
		}
	}
}

// TestNilBackend: the methods of a nil or zero *Backend report an error
// wrapping distlock.ErrInvalidBackend (or a zero value, for those without
// an error) instead of panicking.
func TestNilBackend(t *testing.T) {
	for name, b := range map[string]*sqllock.Backend{"nil": nil, "zero": new(sqllock.Backend)} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s *Backend panicked: %v", name, r)
				}
			}()
			ctx := context.Background()
			check := func(method string, err error) {
				t.Helper()
				if !errors.Is(err, distlock.ErrInvalidBackend) {
					t.Errorf("%s: %v; want ErrInvalidBackend", method, err)
				}
			}
			for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Read, driver.Permit} {
				l := driver.Lease{Key: "k", Owner: "o", Kind: kind}
				_, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Second, Limit: 2})
				check("Acquire", err)
				check("Release", b.Release(ctx, l))
				_, err = b.Refresh(ctx, l, time.Second)
				check("Refresh", err)
			}
			_, err := b.Inspect(ctx, "k")
			check("Inspect", err)
			_, err = b.List(ctx, "")
			check("List", err)
			_, err = b.Break(ctx, "k")
			check("Break", err)
			_, err = b.Watch(ctx, "k", "")
			check("Watch", err)
			check("Close", b.Close())
			if c := b.Capabilities(); c != (driver.Capabilities{}) {
				t.Errorf("Capabilities() = %+v; want none", c)
			}
			if b.Dialect() != "" || b.Table() != "" {
				t.Errorf("Dialect(), Table() = %q, %q; want empty", b.Dialect(), b.Table())
			}
		})
	}
}

// TestCreateTableHonoursContext: while one caller's CREATE TABLE waits
// (another session is creating the same table and has not committed), a
// caller with a short deadline returns at its deadline instead of queueing
// behind the first; when the first caller gives up, a waiting caller
// creates the table itself.
func TestCreateTableHonoursContext(t *testing.T) {
	_, d := startPostgres(t)
	const table = "blocked_locks"
	admin := d.open(t)
	blocker, err := admin.BeginTx(ctxFor(t, time.Minute), nil)
	if err != nil {
		t.Fatalf("BEGIN: %v", err)
	}
	if _, err := blocker.Exec("CREATE TABLE " + table + " (x INTEGER)"); err != nil {
		t.Fatalf("CREATE TABLE in the blocking transaction: %v", err)
	}
	unblock := time.AfterFunc(6*time.Second, func() { blocker.Rollback() })
	defer unblock.Stop()
	defer blocker.Rollback()

	b := d.backend(t, sqllock.WithTable(table))
	acquire := func(ctx context.Context, owner string) error {
		g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k-" + owner, Owner: owner}, TTL: time.Minute})
		if err == nil && !g.Acquired {
			err = errors.New("not granted")
		}
		return err
	}
	first := make(chan error, 1)
	firstCtx, cancelFirst := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelFirst()
	go func() { first <- acquire(firstCtx, "first") }()
	// Wait until the first caller's CREATE TABLE waits on the blocker.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		q := `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE TABLE IF NOT EXISTS ` + table + `%'`
		if err := admin.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the first caller's CREATE TABLE does not wait on the blocking transaction")
		}
	}

	const deadline = 300 * time.Millisecond
	short, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err = acquire(short, "short")
	if waited := time.Since(start); waited > deadline+700*time.Millisecond {
		t.Errorf("a caller with a %v deadline waited %v behind another's CREATE TABLE", deadline, waited)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with a %v deadline while the table is being created: %v; want DeadlineExceeded", deadline, err)
	}

	patient := make(chan error, 1)
	go func() { patient <- acquire(ctxFor(t, 30*time.Second), "patient") }()
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("first caller, whose deadline passed while blocked: %v; want DeadlineExceeded", err)
	}
	time.Sleep(200 * time.Millisecond) // the patient caller waits on the blocker now
	blocker.Rollback()
	if err := <-patient; err != nil {
		t.Errorf("a patient caller once the first gave up and the blocker rolled back: %v", err)
	}
}
