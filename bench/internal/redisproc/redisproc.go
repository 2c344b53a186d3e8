// Package redisproc runs throw-away redis-server processes for the
// benchmarks: loopback only, a temporary directory each, no persistence.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// startTimeout bounds how long a new server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process started by [Start].
type Server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
}

// Start launches bin (a redis-server executable) on a free port of
// 127.0.0.1 with snapshots and the append-only file turned off, and returns
// once it answers PING. A port taken by someone else between choosing and
// binding it is retried with another.
func Start(ctx context.Context, bin string) (*Server, error) {
	var lastErr error
	for range 5 {
		s, err := start(ctx, bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, lastErr
}

var errPortTaken = errors.New("port already in use")

func start(ctx context.Context, bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "lockbench-redis-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:  dir,
		done: make(chan struct{}),
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
	}
	if err := s.spawn(bin, args); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.awaitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// spawn starts the process from a goroutine locked to its OS thread until
// the process is reaped: on Linux the child is killed when that thread
// exits (see sysProcAttr), so a benchmark that dies leaves no server behind,
// and the Go runtime must not retire the thread earlier.
func (s *Server) spawn(bin string, args []string) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.cmd = cmd
		started <- nil
		_ = cmd.Wait() // a stopped server's exit status says nothing useful
		close(s.done)
	}()
	return <-started
}

func (s *Server) awaitReady(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	for {
		pid, err := pingPID(s.addr)
		if err == nil && pid == s.cmd.Process.Pid {
			return nil
		}
		select {
		case <-s.done:
			log := s.logTail()
			if strings.Contains(log, "already in use") {
				return fmt.Errorf("redis-server on %s: %w", s.addr, errPortTaken)
			}
			return fmt.Errorf("redis-server on %s exited at start; log:\n%s", s.addr, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %v (%v); log:\n%s", s.addr, startTimeout, err, s.logTail())
		}
	}
}

// pingPID sends PING and INFO server on a fresh connection and returns the
// server's process id, so that a server of someone else that grabbed the
// port is not mistaken for ours.
func pingPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "+PONG\r\n" {
		return 0, fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return 0, err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	pid, ok := InfoField(string(body), "process_id")
	if !ok {
		return 0, errors.New("INFO server has no process_id")
	}
	return strconv.Atoi(pid)
}

// InfoField returns the value of field in the text of an INFO reply.
func InfoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok && k == field {
			return v, true
		}
	}
	return "", false
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s), waits for
// it to exit and removes its directory. It is safe to call more than once.
func (s *Server) Stop() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(terminate)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// Version returns the output of `bin --version`, trimmed.
func Version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
