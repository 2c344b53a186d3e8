package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/redislock"
)

var errNoRedisServer = errors.New("redis-server not found in PATH")

const (
	// serverReadyTimeout bounds how long a fresh redis-server may take to
	// answer PING; a healthy one needs milliseconds.
	serverReadyTimeout = 10 * time.Second
	// serverStopTimeout is how long redis-server gets to exit on SIGTERM
	// before it is killed.
	serverStopTimeout = 5 * time.Second
	serverAttempts    = 3
)

// demoRedis is the redis-server the demo starts for itself.
type demoRedis struct {
	dir    string
	addr   string
	cmd    *exec.Cmd
	exited <-chan error
}

// startDemoRedis starts redis-server on a free port of 127.0.0.1, with no
// persistence and its files in a temporary directory, and waits until it
// answers PING. The caller must call stop.
func startDemoRedis(ctx context.Context) (*demoRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedisServer
	}
	dir, err := os.MkdirTemp("", "distlock-demo-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s, err := launchRedis(ctx, bin, dir)
		if err == nil {
			return s, nil
		}
		// Another process may take the port between our picking it and
		// the server binding it; only that is worth another try.
		if attempt == serverAttempts || !strings.Contains(err.Error(), "already in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func launchRedis(ctx context.Context, bin, dir string) (*demoRedis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	prepareServer(cmd)
	exited, _, err := startReaped(cmd)
	if err != nil {
		return nil, err
	}
	s := &demoRedis{dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: exited}
	deadline := time.Now().Add(serverReadyTimeout)
	for {
		if err := ping(s.addr); err == nil {
			if err := s.declareFresh(ctx); err != nil {
				s.kill()
				return nil, err
			}
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server exited at start: %s", logTail(logPath))
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("redis-server did not answer PING within %v: %s", serverReadyTimeout, logTail(logPath))
		}
	}
}

// declareFresh tells the restart guard that the server is new, so that the
// demo's first locks do not wait for it to have run a maximum lease length.
func (s *demoRedis) declareFresh(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr})
	defer rdb.Close()
	b := redislock.New(rdb)
	defer b.Close()
	return b.DeclareFresh(ctx)
}

func (s *demoRedis) url() string { return "redis://" + s.addr + "/0" }

// stop shuts the server down and removes its directory.
func (s *demoRedis) stop() {
	_ = s.cmd.Process.Signal(sigTerm)
	select {
	case <-s.exited:
	case <-time.After(serverStopTimeout):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *demoRedis) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ping checks that a Redis server answers at addr, in the inline form of
// the protocol, without a client library.
func ping(addr string) error {
	line, err := plainReply(context.Background(), addr, time.Second)
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// logTail returns the last lines of a server log, for an error message.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}
