package testserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// MariaDB is a private MariaDB server owned by a test: installed into a
// temporary directory by mariadb-install-db, listening on a free port of
// 127.0.0.1, and killed when the test ends. As root it runs as the user
// nobody. It has a database "distlock" and a user "distlock" with the
// password "distlock-pw" allowed everything on it.
type MariaDB struct {
	*dbProc
	port int
}

// MariaDB's test account.
const (
	MariaDBUser     = "distlock"
	MariaDBPassword = "distlock-pw"
	MariaDBDatabase = "distlock"
)

// StartMariaDB installs and starts a MariaDB server. The binaries
// (mariadb-install-db, mariadbd) are looked up in PATH and /usr/sbin;
// without them the test is skipped, or failed under
// DISTLOCK_REQUIRE_SERVERS=1.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	install := findBinary(tb, "mariadb-install-db", "mariadb-server", "/usr/bin")
	server := findBinary(tb, "mariadbd", "mariadb-server", "/usr/sbin")
	cred, err := serverUser()
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	dir := newDBDir(tb, cred, "distlock-maria-*")
	data := filepath.Join(dir, "data")
	if err := runAs(cred, dir, install, "--no-defaults", "--datadir="+data, "--skip-test-db",
		"--auth-root-authentication-method=normal"); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	initSQL := filepath.Join(dir, "init.sql")
	err = os.WriteFile(initSQL, fmt.Appendf(nil, `CREATE DATABASE IF NOT EXISTS %[1]s;
CREATE USER IF NOT EXISTS '%[2]s'@'%%' IDENTIFIED BY '%[3]s';
GRANT ALL ON %[1]s.* TO '%[2]s'@'%%';
`, MariaDBDatabase, MariaDBUser, MariaDBPassword), 0o644)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	var last error
	for range startAttempts {
		ports, err := freePorts(1)
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		m := &MariaDB{port: ports[0]}
		m.dbProc = &dbProc{tb: tb, dir: dir, cred: cred, argv: []string{server, "--no-defaults",
			"--datadir=" + data, "--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--skip-name-resolve",
			"--init-file=" + initSQL, "--innodb-flush-log-at-trx-commit=2", "--max-connections=300",
			"--innodb-buffer-pool-size=32M", "--skip-log-bin"}}
		m.ready = m.isReady
		if last = m.start(); last == nil {
			tb.Cleanup(m.stop)
			return m
		}
		m.stop()
	}
	tb.Fatalf("testserver: mariadb: %v", last)
	return nil
}

// isReady dials the port, which mariadbd opens once it accepts
// connections (after recovery and the init file).
func (m *MariaDB) isReady() error {
	c, err := net.Dial("tcp", m.Addr())
	if err != nil {
		return err
	}
	return c.Close()
}

// Addr is the server's host:port.
func (m *MariaDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

// DSN is a go-sql-driver/mysql data source name for the test account.
func (m *MariaDB) DSN() string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s", MariaDBUser, MariaDBPassword, m.Addr(), MariaDBDatabase)
}

// URL is a mysql:// URL of the test account's database, as distlock's
// sqllock/sqlurl opens it.
func (m *MariaDB) URL() string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", MariaDBUser, MariaDBPassword, m.Addr(), MariaDBDatabase)
}
