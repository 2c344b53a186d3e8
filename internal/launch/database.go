//go:build linux

package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dbReadyTimeout bounds a database server's start-up: MariaDB's first
// start sets up its system tables, slowly on a busy machine.
const dbReadyTimeout = 30 * time.Second

// ErrNoDatabase is returned by [StartPostgres] and [StartMariaDB] when the
// server's programs are missing.
var ErrNoDatabase = errors.New("launch: database server not found")

// MariaDB's account on the servers [StartMariaDB] starts.
const (
	MariaDBUser     = "distlock"
	MariaDBPassword = "distlock-pw"
	MariaDBDatabase = "distlock"
)

// Database is a private PostgreSQL or MariaDB server: set up in a
// temporary directory, listening on a free port of 127.0.0.1, and run in a
// process group of its own, as the user nobody when this program runs as
// root (both servers refuse root). Pause, Resume, Kill and Restart act on
// the server and every process it forked (PostgreSQL runs one per
// connection). Its methods are safe for concurrent use.
type Database struct {
	kind  string // "postgres" or "mariadb"
	dir   string // owned by the server's user; removed by Close
	cred  *syscall.Credential
	argv  []string
	port  int
	ready func() error

	mu   sync.Mutex
	pid  int
	done chan struct{}
}

// StartPostgres initialises and starts a PostgreSQL server with trust
// authentication, fsync off. Its binaries (initdb, postgres) are looked up
// in PATH and in Debian's /usr/lib/postgresql/*/bin. The caller must Close
// it.
func StartPostgres(ctx context.Context) (*Database, error) {
	dirs := []string{"/usr/lib/postgresql/*/bin"}
	initdb, err := findProgram("initdb", "postgresql", dirs...)
	if err != nil {
		return nil, err
	}
	postgres, err := findProgram("postgres", "postgresql", dirs...)
	if err != nil {
		return nil, err
	}
	d, err := newDatabase("postgres", "distlock-pg-*")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(d.dir, "data")
	if err := d.runAs(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		_ = d.Close()
		return nil, err
	}
	d.ready = func() error {
		b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
		if err != nil {
			return err
		}
		// The status line says "ready" once connections are accepted.
		if lines := strings.Split(string(b), "\n"); len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
			return errors.New("not ready")
		}
		return dial(d.Addr())
	}
	return d, d.startOnFreePort(ctx, func(port string) []string {
		return []string{postgres, "-D", data, "-p", port, "-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=" + d.dir, "-c", "fsync=off", "-c", "max_connections=200",
			"-c", "log_min_messages=warning"}
	})
}

// StartMariaDB installs and starts a MariaDB server with a database and a
// user (MariaDBDatabase, MariaDBUser, MariaDBPassword) allowed everything
// on it. Its binaries (mariadb-install-db, mariadbd) are looked up in PATH
// and /usr/sbin. The caller must Close it.
func StartMariaDB(ctx context.Context) (*Database, error) {
	install, err := findProgram("mariadb-install-db", "mariadb-server", "/usr/bin")
	if err != nil {
		return nil, err
	}
	server, err := findProgram("mariadbd", "mariadb-server", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	d, err := newDatabase("mariadb", "distlock-maria-*")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(d.dir, "data")
	// A temporary directory of its own: mariadbd deletes every #sql file in
	// its tmpdir as it starts, which, in a shared /tmp, pulls the temporary
	// tables from under another instance's bootstrap (it fails, or crashes).
	tmp, err := d.mkdir("tmp")
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	if err := d.runAs(install, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, "--skip-test-db",
		"--auth-root-authentication-method=normal"); err != nil {
		_ = d.Close()
		return nil, err
	}
	initSQL := filepath.Join(d.dir, "init.sql")
	err = os.WriteFile(initSQL, fmt.Appendf(nil, `CREATE DATABASE IF NOT EXISTS %[1]s;
CREATE USER IF NOT EXISTS '%[2]s'@'%%' IDENTIFIED BY '%[3]s';
GRANT ALL ON %[1]s.* TO '%[2]s'@'%%';
`, MariaDBDatabase, MariaDBUser, MariaDBPassword), 0o644)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	// mariadbd opens its port once recovery and the init file are done.
	d.ready = func() error { return dial(d.Addr()) }
	return d, d.startOnFreePort(ctx, func(port string) []string {
		return []string{server, "--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp,
			"--socket=" + filepath.Join(d.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(d.dir, "mysqld.pid"),
			"--port=" + port, "--bind-address=127.0.0.1", "--skip-name-resolve", "--init-file=" + initSQL,
			"--innodb-flush-log-at-trx-commit=2", "--max-connections=300", "--innodb-buffer-pool-size=32M", "--skip-log-bin"}
	})
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// findProgram looks name up in PATH and then in dirs (globs).
func findProgram(name, pkg string, dirs ...string) (string, error) {
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		for i := len(matches) - 1; i >= 0; i-- { // the newest version last in glob order
			if st, err := os.Stat(matches[i]); err == nil && !st.IsDir() {
				return matches[i], nil
			}
		}
	}
	return "", fmt.Errorf("%w: %s not found; install it with scripts/install-deps.sh or apt-get install %s", ErrNoDatabase, name, pkg)
}

// newDatabase makes the server's directory, owned by the user it will run
// as: nobody when this program runs as root, else this program's user.
func newDatabase(kind, pattern string) (*Database, error) {
	d := &Database{kind: kind}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("launch: running as root and no user nobody to run %s as: %w", kind, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		d.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	// Not a directory under a private parent (such as a test's TempDir):
	// the server's user must reach it.
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, err
	}
	d.dir = dir
	if d.cred != nil {
		if err := os.Chown(dir, int(d.cred.Uid), int(d.cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	return d, nil
}

// mkdir makes a directory in the server's directory, owned by the server's
// user, and returns its path.
func (d *Database) mkdir(name string) (string, error) {
	dir := filepath.Join(d.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if d.cred != nil {
		if err := os.Chown(dir, int(d.cred.Uid), int(d.cred.Gid)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// runAs runs a setup command (initdb, mariadb-install-db) to completion as
// the server's user.
func (d *Database) runAs(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = d.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("launch: %s: %w\n%s", filepath.Base(argv[0]), err, out)
	}
	return nil
}

// startOnFreePort starts the server on a free port, trying another if the
// one picked was taken in the meantime.
func (d *Database) startOnFreePort(ctx context.Context, argv func(port string) []string) error {
	var err error
	for range startAttempts {
		if d.port, err = FreePort(); err != nil {
			break
		}
		d.argv = argv(strconv.Itoa(d.port))
		if err = d.start(ctx); err == nil {
			return nil
		}
		d.stop()
	}
	_ = d.Close()
	return fmt.Errorf("launch: %s: %w", d.kind, err)
}

// start runs d.argv and waits until d.ready reports the server ready. The
// forking goroutine stays on its OS thread until the child is reaped, so
// that the kernel's death signal, which follows the thread, fires only
// when this program dies.
func (d *Database) start(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(d.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(d.argv[0], d.argv[1:]...)
		cmd.Dir = d.dir
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		d.mu.Lock()
		d.pid, d.done = cmd.Process.Pid, done
		d.mu.Unlock()
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return err
	}
	for end := time.Now().Add(dbReadyTimeout); ; time.Sleep(20 * time.Millisecond) {
		err := d.ready()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("server exited during start-up: %v\n%s", err, d.LogTail())
		default:
		}
		if ctx.Err() != nil || time.Now().After(end) {
			return fmt.Errorf("server not ready: %v\n%s", errors.Join(ctx.Err(), err), d.LogTail())
		}
	}
}

// LogTail returns the end of the server's log, for error messages.
func (d *Database) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (d *Database) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)) }

// URL returns a URL of the server's database as sqllock/sqlurl opens it:
// postgres://postgres@… (the superuser, no password) or mysql://… (the
// MariaDB account above).
func (d *Database) URL() string {
	if d.kind == "postgres" {
		return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", d.Addr())
	}
	return fmt.Sprintf("mysql://%s:%s@%s/%s", MariaDBUser, MariaDBPassword, d.Addr(), MariaDBDatabase)
}

// Driver and DSN open the server's database with database/sql: "pgx" and
// a postgres:// URL, or "mysql" and a go-sql-driver/mysql DSN.
func (d *Database) Driver() string {
	if d.kind == "postgres" {
		return "pgx"
	}
	return "mysql"
}

// DSN: see Driver.
func (d *Database) DSN() string {
	if d.kind == "postgres" {
		return d.URL()
	}
	return fmt.Sprintf("%s:%s@tcp(%s)/%s", MariaDBUser, MariaDBPassword, d.Addr(), MariaDBDatabase)
}

// signal sends sig to every descendant of the server and then to its
// process group: PostgreSQL's backends each call setsid, leaving the
// group. Children are signalled first, so that a stopped parent cannot
// fork new ones unseen. It returns the descendants it signalled.
func (d *Database) signal(sig syscall.Signal) []int {
	d.mu.Lock()
	pid := d.pid
	d.mu.Unlock()
	if pid <= 0 {
		return nil
	}
	pids := descendants(pid)
	// The whole group at once first: a server signalled after its children
	// could replace them meanwhile. Then any child that left the group.
	_ = syscall.Kill(-pid, sig)
	for i := len(pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(pids[i], sig)
	}
	return pids
}

// Pause stops every process of the server (SIGSTOP): connections stay
// open and nothing answers, as in a long stall, until Resume.
func (d *Database) Pause() error {
	d.signal(syscall.SIGSTOP)
	return nil
}

// Resume continues a paused server.
func (d *Database) Resume() error {
	d.signal(syscall.SIGCONT)
	return nil
}

// Kill ends every process of the server with SIGKILL, as a crash would,
// and waits until they are gone: killed children keep the listening socket
// and shared memory until they exit. Killing a server that is not running
// does nothing.
func (d *Database) Kill() error {
	d.mu.Lock()
	pgid := d.pid // the server leads its process group
	d.mu.Unlock()
	children := d.signal(syscall.SIGKILL)
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(exitTimeout):
			return fmt.Errorf("launch: %s on %s did not exit %v after SIGKILL", d.kind, d.Addr(), exitTimeout)
		}
	}
	// A child the server forked while the signals went out (replacing one
	// killed before it) is not among children, but it is in the server's
	// process group, and holds the listening socket until it is gone.
	if pgid > 0 {
		for _, p := range groupMembers(pgid) {
			_ = syscall.Kill(p, syscall.SIGKILL)
			children = append(children, p)
		}
	}
	if !gone(children, exitTimeout) {
		return fmt.Errorf("launch: %s on %s: child processes did not exit %v after SIGKILL", d.kind, d.Addr(), exitTimeout)
	}
	return nil
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	for pid, fields := range processes() {
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// processes reads /proc: for each process, the fields of its stat after
// the command name (state, ppid, pgrp, ...). The name may hold spaces, so
// the split is after its closing ')'.
func processes() map[int][]string {
	entries, _ := os.ReadDir("/proc")
	out := make(map[int][]string, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			out[pid] = strings.Fields(string(stat[i+1:]))
		}
	}
	return out
}

// Restart starts the server again on the same port and data directory,
// killing it first if it still runs. What was committed survives (the
// server runs crash recovery).
func (d *Database) Restart(ctx context.Context) error {
	if err := d.Kill(); err != nil {
		return err
	}
	return d.start(ctx)
}

// stop kills the server, paused or not, and waits a while for it.
func (d *Database) stop() {
	children := d.signal(syscall.SIGKILL)
	d.signal(syscall.SIGCONT)
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(exitTimeout):
		}
	}
	gone(children, exitTimeout)
}

// Close kills the server and removes its directory.
func (d *Database) Close() error {
	d.stop()
	return os.RemoveAll(d.dir)
}

// gone waits until none of pids runs (a zombie counts as gone).
func gone(pids []int, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		alive := false
		for _, pid := range pids {
			stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
				alive = true
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	children := make(map[int][]int)
	for child, fields := range processes() {
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], child)
		}
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
