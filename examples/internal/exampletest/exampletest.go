// Package exampletest builds the example programs and runs them for their
// tests, against memlock or a redis-server it starts.
package exampletest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// bin is the directory that Main built the programs into.
var bin string

// Main builds the packages pkgs, relative to dir, into a temporary
// directory, runs the tests and returns their exit status. Call it from
// TestMain. Under the race detector the programs are built with it too.
func Main(m *testing.M, dir string, pkgs ...string) int {
	tmp, err := os.MkdirTemp("", "distlock-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-o", tmp + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
		// A race-enabled program sleeps a second at exit by default. A race
		// it detects still shows as exit status 66.
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go %s (in %s): %v\n%s", strings.Join(cmd.Args[1:], " "), dir, err, out)
		return 1
	}
	bin = tmp
	return m.Run()
}

// StartRedis starts a redis-server for the test and returns its address
// and a distlock client on it.
func StartRedis(t *testing.T) (addr string, c *distlock.Client) {
	t.Helper()
	srv := testserver.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return srv.Addr(), distlock.New(redislock.New(rdb))
}

// StartNewRedis starts a redis-server for the test as a user finds one
// that has just started: not declared fresh, so the restart guard holds
// new locks back for its first minute. It returns the server's address.
func StartNewRedis(t *testing.T) (addr string) {
	t.Helper()
	return testserver.StartRedis(t, testserver.AsRestarted()).Addr()
}

// FlushAll empties the Redis server at addr.
func FlushAll(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// Proc is a running program.
type Proc struct {
	Cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	lines  chan string // stdout, line by line
	done   chan struct{}
	code   int
}

// Start starts the program name, built by Main, with args and with env
// added to the environment (DISTLOCK_URL is cleared). The program is
// killed when the test ends, if it still runs.
func Start(t *testing.T, env []string, name string, args ...string) *Proc {
	t.Helper()
	p := &Proc{lines: make(chan string, 100), done: make(chan struct{})}
	p.Cmd = exec.Command(filepath.Join(bin, name), args...)
	p.Cmd.Env = append(append(os.Environ(), "DISTLOCK_URL="), env...)
	p.Cmd.Stderr = &lockedWriter{&p.mu, &p.stderr}
	out, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(io.TeeReader(out, &lockedWriter{&p.mu, &p.stdout}))
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for lines: they stay in stdout
			}
		}
		_ = p.Cmd.Wait()
		p.code = p.Cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// Output returns what the program printed so far.
func (p *Proc) Output() (stdout, stderr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String(), p.stderr.String()
}

// Done is closed when the program has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// WaitLine waits for a line of stdout that starts with prefix and returns
// it, failing the test if the program ends or a minute passes first.
func (p *Proc) WaitLine(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-p.done:
			t.Fatalf("%s exited (status %d) before printing %q\n%s", p.name(), p.code, prefix, p.report())
		case <-timeout:
			t.Fatalf("%s printed no line %q within a minute\n%s", p.name(), prefix, p.report())
		}
	}
}

// WaitStderr waits until the program's stderr holds text, failing the test
// if the program ends or a minute passes first: the program says what it
// waits for while it still waits.
func (p *Proc) WaitStderr(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, stderr := p.Output(); strings.Contains(stderr, text) {
			return
		}
		select {
		case <-tick.C:
		case <-p.done:
			if _, stderr := p.Output(); strings.Contains(stderr, text) {
				t.Fatalf("%s exited (status %d) instead of waiting\n%s", p.name(), p.code, p.report())
			}
			t.Fatalf("%s exited (status %d) without saying %q\n%s", p.name(), p.code, text, p.report())
		case <-timeout:
			t.Fatalf("%s said nothing of %q within a minute\n%s", p.name(), text, p.report())
		}
	}
}

// Wait waits for the program to exit, fails the test unless it exits with
// status code, and returns stdout.
func (p *Proc) Wait(t *testing.T, code int) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.Cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit within 2 minutes\n%s", p.name(), p.report())
	}
	if p.code != code {
		t.Fatalf("%s: exit status %d, want %d\n%s", p.name(), p.code, code, p.report())
	}
	stdout, _ := p.Output()
	return stdout
}

func (p *Proc) name() string {
	return strings.Join(append([]string{filepath.Base(p.Cmd.Path)}, p.Cmd.Args[1:]...), " ")
}

func (p *Proc) report() string {
	stdout, stderr := p.Output()
	return "stdout:\n" + stdout + "stderr:\n" + stderr
}

// Run runs the program to its end, fails the test unless it exits with
// status code, and returns what it printed.
func Run(t *testing.T, code int, env []string, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	p := Start(t, env, name, args...)
	p.Wait(t, code)
	return p.Output()
}

// WantTokenLines is WantLines where one line of want holds a "%d" that
// stands for a fencing token greater than after; it returns that token.
// Tokens increase, but not by one: Redis backends take them from the
// server clock when it is ahead of the counter.
func WantTokenLines(t *testing.T, out string, after uint64, want ...string) uint64 {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var token uint64
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		if !strings.Contains(want[i], "%d") {
			ok = got[i] == want[i]
			continue
		}
		_, err := fmt.Sscanf(got[i], want[i], &token)
		ok = err == nil && token > after && fmt.Sprintf(want[i], token) == got[i]
	}
	if !ok {
		t.Fatalf("output:\n%s\nwant (%%d: a token above %d):\n%s", out, after, strings.Join(want, "\n"))
	}
	return token
}

// WantLines fails the test unless out consists of want, line by line.
func WantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	if strings.TrimSuffix(out, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}
