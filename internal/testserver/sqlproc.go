package testserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dbProc is a database server (postgres or mariadbd) that runs as an
// unprivileged user in its own process group, so that Pause, Kill and
// Restart reach the server and every process it forked (PostgreSQL runs a
// process per connection).
type dbProc struct {
	tb    testing.TB
	dir   string // owned by the server's user; removed at cleanup
	cred  *syscall.Credential
	argv  []string
	ready func() error // nil once the server accepts connections

	mu     sync.Mutex
	pid    int
	done   chan struct{}
	paused bool
}

// serverUser is the account the database servers run as when the tests run
// as root: both refuse to run as root. Outside root, they run as the caller.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root and no user nobody to run the database as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// newDBDir makes a directory the server's user owns. tb.TempDir is not
// used because its parents are private to root.
func newDBDir(tb testing.TB, cred *syscall.Credential, pattern string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("testserver: %v", err)
		}
	}
	return dir
}

// runAs runs a setup command (initdb, mariadb-install-db) to completion as
// cred, returning its output on failure.
func runAs(cred *syscall.Credential, dir string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(argv[0]), err, out)
	}
	return nil
}

// start runs p.argv and waits until p.ready reports the server ready.
// Like spawn (proc.go), the forking goroutine stays on its OS thread until
// the child is reaped, so that Pdeathsig fires only when the test binary
// dies; unlike it, the child gets its own process group and p.cred.
func (p *dbProc) start() error {
	log, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(p.argv[0], p.argv[1:]...)
		cmd.Dir = p.dir
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.mu.Lock()
		p.pid, p.done, p.paused = cmd.Process.Pid, done, false
		p.mu.Unlock()
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return err
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := p.ready()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("server exited during start-up: %v\n%s", err, p.logTail())
		default:
		}
		if time.Now().After(end) {
			return fmt.Errorf("server not ready after 30s: %v\n%s", err, p.logTail())
		}
	}
}

func (p *dbProc) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// group signals the server's process group and every descendant of the
// server: PostgreSQL's backends each call setsid, leaving the group.
// Children are signalled first, so that a stopped parent cannot fork new
// ones unseen.
// It returns the descendants it signalled.
func (p *dbProc) group(sig syscall.Signal) []int {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	if pid <= 0 {
		return nil
	}
	pids := descendants(pid)
	for i := len(pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(pids[i], sig)
	}
	_ = syscall.Kill(-pid, sig)
	return pids
}

// gone waits until none of pids runs (a zombie counts as gone): killed
// children keep the listening socket and shared memory until they exit.
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

// descendants lists the processes below pid, read from /proc (Linux);
// elsewhere it finds none.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := make(map[int][]int)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
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

// Pause stops every process of the server (SIGSTOP): connections stay
// open and nothing answers, as in a long stall. Resume undoes it.
func (p *dbProc) Pause() {
	_ = p.group(syscall.SIGSTOP)
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume continues a paused server.
func (p *dbProc) Resume() {
	_ = p.group(syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// Kill ends every process of the server with SIGKILL, as a crash would,
// and waits for the main one to be reaped.
func (p *dbProc) Kill() {
	children := p.group(syscall.SIGKILL)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(exitTimeout):
			p.tb.Errorf("testserver: server did not exit %v after SIGKILL", exitTimeout)
		}
	}
	if !gone(children, exitTimeout) {
		p.tb.Errorf("testserver: server's child processes did not exit %v after SIGKILL", exitTimeout)
	}
}

// Restart starts the server again on the same port and data directory,
// killing it first if it still runs. The data committed before survives
// (the server runs crash recovery).
func (p *dbProc) Restart() {
	p.tb.Helper()
	p.Kill()
	if err := p.start(); err != nil {
		p.tb.Fatalf("testserver: restart: %v", err)
	}
}

// stop is the cleanup: the server is killed, paused or not.
func (p *dbProc) stop() {
	children := p.group(syscall.SIGKILL)
	_ = p.group(syscall.SIGCONT)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(exitTimeout):
		}
	}
	gone(children, exitTimeout)
}

// findBinary looks name up in PATH and then in dirs (globs), or reports
// the test unavailable (see Require).
func findBinary(tb testing.TB, name, pkg string, dirs ...string) string {
	tb.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		for i := len(matches) - 1; i >= 0; i-- { // the newest version last in glob order
			if st, err := os.Stat(matches[i]); err == nil && !st.IsDir() {
				return matches[i]
			}
		}
	}
	unavailable(tb, "%s not found; install it with `sudo scripts/install-deps.sh` or `apt-get install %s`", name, pkg)
	return ""
}

var errNotReady = errors.New("not ready")
