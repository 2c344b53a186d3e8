package testserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Postgres is a private PostgreSQL server owned by a test: initdb'd into a
// temporary directory, listening on a free port of 127.0.0.1 with trust
// authentication, and killed when the test ends. As root it runs as the
// user nobody (PostgreSQL refuses root). Pause, Resume, Kill and Restart
// act on the postmaster and every backend process.
type Postgres struct {
	*dbProc
	port int
}

// StartPostgres initialises and starts a PostgreSQL server. The binaries
// (initdb, postgres) are looked up in PATH and in Debian's
// /usr/lib/postgresql/*/bin; without them the test is skipped, or failed
// under DISTLOCK_REQUIRE_SERVERS=1.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	dirs := []string{"/usr/lib/postgresql/*/bin"}
	initdb := findBinary(tb, "initdb", "postgresql", dirs...)
	postgres := findBinary(tb, "postgres", "postgresql", dirs...)
	cred, err := serverUser()
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	dir := newDBDir(tb, cred, "distlock-pg-*")
	data := filepath.Join(dir, "data")
	if err := runAs(cred, dir, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	var last error
	for range startAttempts {
		ports, err := freePorts(1)
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		p := &Postgres{port: ports[0]}
		p.dbProc = &dbProc{tb: tb, dir: dir, cred: cred, argv: []string{postgres,
			"-D", data, "-p", strconv.Itoa(p.port), "-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=" + dir, "-c", "fsync=off", "-c", "max_connections=200",
			"-c", "log_min_messages=warning"}}
		p.ready = p.isReady
		if last = p.start(); last == nil {
			tb.Cleanup(p.stop)
			return p
		}
		p.stop()
	}
	tb.Fatalf("testserver: postgres: %v", last)
	return nil
}

// isReady reads the postmaster's status line from postmaster.pid, which
// says "ready" once connections are accepted, and dials the port.
func (p *Postgres) isReady() error {
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return errNotReady
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return err
	}
	return c.Close()
}

// Addr is the server's host:port.
func (p *Postgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// URL is a postgres:// URL of the server's database "postgres" as the
// superuser postgres (no password).
func (p *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", p.Addr())
}
