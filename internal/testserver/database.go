package testserver

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock-go/distlock/internal/launch"
)

// Database is a private database server owned by a test, run by package
// launch: set up in a temporary directory, listening on a free port of
// 127.0.0.1, as the user nobody when the tests run as root, and killed
// when the test ends. Pause, Resume, Kill and Restart act on the server
// and every process it forked; a failure fails the test.
type Database struct {
	tb  testing.TB
	srv *launch.Database
}

// Postgres is a PostgreSQL server with trust authentication.
type Postgres struct{ Database }

// MariaDB is a MariaDB server with a database MariaDBDatabase and a user
// MariaDBUser (password MariaDBPassword) allowed everything on it.
type MariaDB struct{ Database }

// MariaDB's test account.
const (
	MariaDBUser     = launch.MariaDBUser
	MariaDBPassword = launch.MariaDBPassword
	MariaDBDatabase = launch.MariaDBDatabase
)

// StartPostgres initialises and starts a PostgreSQL server. Without its
// programs (Debian's postgresql package) the test is skipped, or failed
// under DISTLOCK_REQUIRE_SERVERS=1.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	return &Postgres{startDatabase(tb, launch.StartPostgres)}
}

// StartMariaDB installs and starts a MariaDB server. Without its programs
// (Debian's mariadb-server package) the test is skipped, or failed under
// DISTLOCK_REQUIRE_SERVERS=1.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	return &MariaDB{startDatabase(tb, launch.StartMariaDB)}
}

func startDatabase(tb testing.TB, start func(context.Context) (*launch.Database, error)) Database {
	tb.Helper()
	srv, err := start(context.Background())
	if errors.Is(err, launch.ErrNoDatabase) {
		unavailable(tb, "%v", err)
	}
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return Database{tb: tb, srv: srv}
}

// Addr is the server's host:port.
func (d *Database) Addr() string { return d.srv.Addr() }

// URL is a URL of the server's database as sqllock/sqlurl opens it: the
// superuser postgres (no password) on PostgreSQL, the test account on
// MariaDB.
func (d *Database) URL() string { return d.srv.URL() }

// DSN is a data source name of the same database for database/sql with
// the driver the server speaks ("pgx" or "mysql").
func (d *Database) DSN() string { return d.srv.DSN() }

// Pause stops every process of the server (SIGSTOP): connections stay
// open and nothing answers, as in a long stall. Resume undoes it.
func (d *Database) Pause() { d.check("pause", d.srv.Pause()) }

// Resume continues a paused server.
func (d *Database) Resume() { d.check("resume", d.srv.Resume()) }

// Kill ends every process of the server with SIGKILL, as a crash would,
// and waits until they are gone.
func (d *Database) Kill() { d.check("kill", d.srv.Kill()) }

// Restart starts the server again on the same port and data directory,
// killing it first if it still runs. The data committed before survives
// (the server runs crash recovery).
func (d *Database) Restart() {
	d.tb.Helper()
	if err := d.srv.Restart(context.Background()); err != nil {
		d.tb.Fatalf("testserver: restart: %v", err)
	}
}

func (d *Database) check(what string, err error) {
	d.tb.Helper()
	if err != nil {
		d.tb.Errorf("testserver: %s: %v", what, err)
	}
}
