package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer PING after
	// being started; a healthy one needs a few milliseconds.
	readyTimeout = 10 * time.Second
	// exitTimeout bounds how long a signalled server may take to exit.
	exitTimeout = 10 * time.Second
	// doTimeout is the deadline of Redis.Do.
	doTimeout = 5 * time.Second
	// startAttempts is how often a start is retried when the chosen port was
	// taken between picking it and the server binding it.
	startAttempts = 5

	logName   = "redis.log"
	stdioName = "stdio.log"
	confName  = "redis.conf"
)

// Option configures a server started by StartRedis, StartSentinel or
// StartCluster.
type Option func(*config)

type config struct {
	persistent bool
	extra      []string
	// conf, if set, is written to confName and passed as the config file;
	// sentinels need one because they persist their state in it.
	conf     string
	sentinel bool
	cluster  bool
	unmarked bool // see AsRestarted
}

// WithPersistence enables the append-only file with an fsync per write, so
// every acknowledged write survives Kill followed by Restart.
func WithPersistence() Option {
	return func(c *config) { c.persistent = true }
}

// WithArgs appends extra command-line arguments for redis-server, such as
// "--maxmemory", "10mb". They come last and so override the defaults.
func WithArgs(args ...string) Option {
	return func(c *config) { c.extra = append(c.extra, args...) }
}

// Redis is one redis-server process owned by a test. It is killed when the
// test (or benchmark) that started it finishes. Its methods are meant to be
// called from the test's goroutine; none of them panics on a process that
// has already exited.
type Redis struct {
	bin     string
	dir     string
	port    int
	busPort int // cluster bus port; 0 outside a cluster
	cfg     config

	// logStart holds the sizes of the log files when the current process
	// was started, so that failure reports show only its own output.
	logStart map[string]int64

	mu     sync.Mutex
	proc   *proc
	paused bool
}

// StartRedis starts a standalone redis-server on a free port of 127.0.0.1,
// with no snapshots, no delay before replication syncs and, unless
// WithPersistence is given, no append-only file, and marks it fresh (see
// [FreshMarker]). It returns once the server answers PING and fails the
// test, with the tail of the server's log, if that takes more than about
// 10 s.
func StartRedis(tb testing.TB, opts ...Option) *Redis {
	tb.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	r := startRedis(tb, cfg)
	r.markFresh(tb)
	return r
}

func startRedis(tb testing.TB, cfg config) *Redis {
	tb.Helper()
	r := &Redis{
		bin: Require(tb, "redis-server"),
		// TempDir registers its removal before our cleanup is registered,
		// so cleanups (run last-in first-out) kill the server first and
		// the directory is not removed under a running server.
		dir: tb.TempDir(),
		cfg: cfg,
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1 + btoi(cfg.cluster))
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		r.port = ports[0]
		if cfg.cluster {
			r.busPort = ports[1]
		}
		if cfg.conf != "" {
			// Rewritten on every attempt: a sentinel that failed to start
			// may already have recorded the port it could not bind.
			if err := os.WriteFile(filepath.Join(r.dir, confName), []byte(cfg.conf), 0o600); err != nil {
				tb.Fatalf("testserver: %v", err)
			}
		}
		err = r.launch()
		if err == nil {
			break
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts {
			continue
		}
		tb.Fatalf("testserver: starting redis-server (attempt %d): %v", attempt, err)
	}
	tb.Cleanup(func() { r.kill(tb) })
	return r
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago. They are held open together so that the kernel cannot hand out the
// same port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (r *Redis) argv() []string {
	a := []string{r.bin}
	if r.cfg.conf != "" {
		// redis-server only accepts the config file as the first argument.
		a = append(a, filepath.Join(r.dir, confName))
	}
	if r.cfg.sentinel {
		a = append(a, "--sentinel")
	}
	a = append(a,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(r.dir, logName),
	)
	if !r.cfg.sentinel {
		// No snapshots, and no 5 s pause before a full sync: replicas of
		// test servers should be in sync as soon as possible.
		a = append(a, "--save", "", "--repl-diskless-sync-delay", "0")
		if r.cfg.persistent {
			a = append(a, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			a = append(a, "--appendonly", "no")
		}
	}
	if r.cfg.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(r.busPort),
		)
	}
	return append(a, r.cfg.extra...)
}

var errAddrInUse = errors.New("address already in use")

// launch starts the process and waits until it answers PING. On failure
// the process is gone and the error carries the log tail.
func (r *Redis) launch() error {
	stdio, err := os.OpenFile(filepath.Join(r.dir, stdioName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r.logStart = map[string]int64{}
	for _, name := range []string{stdioName, logName} {
		if fi, err := os.Stat(filepath.Join(r.dir, name)); err == nil {
			r.logStart[name] = fi.Size()
		}
	}
	p, err := spawn(r.argv(), stdio)
	stdio.Close() // the child has its own descriptor
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc, r.paused = p, false
	r.mu.Unlock()

	deadline := time.Now().Add(readyTimeout)
	for {
		// PING, not a dial, decides: a server loading its append-only file
		// accepts connections but answers -LOADING. The process_id check
		// guards against the server of another test that took the port
		// between our picking it and our server binding it: ours then
		// exits with "address already in use", handled below.
		rs, err := roundTrip(r.Addr(), 500*time.Millisecond, []string{"PING"}, []string{"INFO", "server"})
		if err == nil && rs[0].kind == '+' && rs[0].str == "PONG" &&
			infoField(rs[1].str, "process_id") == strconv.Itoa(p.cmd.Process.Pid) {
			return nil
		}
		if p.exited() {
			tail := r.logTail()
			if strings.Contains(tail, "already in use") {
				return fmt.Errorf("%w: port %d: %s", errAddrInUse, r.port, tail)
			}
			return fmt.Errorf("redis-server exited before answering PING on %s; log tail:\n%s", r.Addr(), tail)
		}
		if time.Now().After(deadline) {
			p.signal(os.Kill)
			<-p.done
			return fmt.Errorf("redis-server did not answer PING on %s within %v (last: %v); log tail:\n%s",
				r.Addr(), readyTimeout, err, r.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail returns the last lines the current process wrote to its log
// file and to stdout/stderr, where configuration errors go before the log
// is opened.
func (r *Redis) logTail() string {
	var b strings.Builder
	for _, name := range []string{stdioName, logName} {
		data, err := os.ReadFile(filepath.Join(r.dir, name))
		if start := r.logStart[name]; start <= int64(len(data)) {
			data = data[start:]
		}
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-30):]
		fmt.Fprintf(&b, "--- %s ---\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port returns the server's TCP port.
func (r *Redis) Port() int { return r.port }

// Dir returns the server's working directory, where its log (redis.log) and
// any persistence files live.
func (r *Redis) Dir() string { return r.dir }

func (r *Redis) current() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Pause freezes the server with SIGSTOP. Connections stay open and new
// ones still complete the TCP handshake, but nothing is answered until
// Resume: to a client this looks like a hung server or a lost network.
func (r *Redis) Pause(tb testing.TB) {
	tb.Helper()
	if sigStop == nil {
		tb.Skip("testserver: pausing a process is not supported on this OS")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc.exited() {
		return
	}
	r.proc.signal(sigStop)
	r.paused = true
}

// Resume undoes Pause with SIGCONT.
func (r *Redis) Resume(tb testing.TB) {
	tb.Helper()
	if sigCont == nil {
		tb.Skip("testserver: resuming a process is not supported on this OS")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proc.signal(sigCont)
	r.paused = false
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Writes that were not yet on disk are lost. Killing a server that
// is not running does nothing.
func (r *Redis) Kill(tb testing.TB) {
	tb.Helper()
	r.kill(tb)
}

func (r *Redis) kill(tb testing.TB) {
	tb.Helper()
	p := r.current()
	p.signal(os.Kill)
	r.await(tb, p)
}

// Stop shuts the server down gracefully with SIGTERM and waits for it to
// exit, falling back to SIGKILL after about 10 s. Stopping a server that
// is not running does nothing.
func (r *Redis) Stop(tb testing.TB) {
	tb.Helper()
	p := r.current()
	if p.exited() {
		return
	}
	r.mu.Lock()
	if r.paused {
		// A stopped process would only act on SIGTERM once continued.
		p.signal(sigCont)
		r.paused = false
	}
	r.mu.Unlock()
	p.signal(sigTerm)
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		tb.Logf("testserver: redis-server on %s ignored SIGTERM for %v; killing it", r.Addr(), exitTimeout)
		p.signal(os.Kill)
		r.await(tb, p)
	}
}

func (r *Redis) await(tb testing.TB, p *proc) {
	tb.Helper()
	select {
	case <-p.done:
		r.mu.Lock()
		r.paused = false
		r.mu.Unlock()
	case <-time.After(exitTimeout):
		tb.Fatalf("testserver: redis-server on %s did not exit within %v after SIGKILL", r.Addr(), exitTimeout)
	}
}

// Restart starts the server again on the same port, in the same directory
// and with the same arguments, stopping it first (see Stop) if it is still
// running, and waits until it answers PING. Data survives only with
// WithPersistence (or in a cluster's nodes.conf); otherwise the server
// comes back empty. Roles changed at run time, such as a replica promoted
// by a failover, are not remembered: the original command line wins.
func (r *Redis) Restart(tb testing.TB) {
	tb.Helper()
	r.Stop(tb)
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = r.launch(); err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) {
			break
		}
		// The port is fixed, so all we can do is wait for whatever
		// grabbed it (typically a short-lived outgoing connection).
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("testserver: restarting redis-server: %v", err)
}

// Do sends a command to the server and returns the reply as described for
// the package-level [Do], with a deadline of 5 s. Failures are returned,
// not reported to tb, so that tests can assert on them.
func (r *Redis) Do(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	return Do(r.Addr(), doTimeout, args...)
}

// mustDo is Do for setup steps, where any error fails the test.
func (r *Redis) mustDo(tb testing.TB, args ...string) string {
	tb.Helper()
	s, err := Do(r.Addr(), doTimeout, args...)
	if err != nil {
		tb.Fatalf("testserver: %s %s: %v", r.Addr(), strings.Join(args, " "), err)
	}
	return s
}

// waitFor polls check until it returns nil and fails the test with what,
// and check's last complaint, if that takes longer than timeout.
func waitFor(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testserver: timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
