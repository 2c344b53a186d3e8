package testserver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

const (
	// exitTimeout bounds how long a signalled server may take to exit.
	exitTimeout = 10 * time.Second
	// doTimeout is the deadline of Redis.Do.
	doTimeout = 5 * time.Second
)

// Option configures a server started by StartRedis, StartSentinel or
// StartCluster.
type Option func(*config)

type config struct {
	persistent bool
	extra      []string
	// conf, if set, is written to the server's configuration file;
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

// Redis is one redis-server process owned by a test, run by package launch.
// It is killed when the test (or benchmark) that started it finishes. Its
// methods are meant to be called from the test's goroutine; none of them
// panics on a process that has already exited.
type Redis struct {
	srv *launch.Redis
	cfg config
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
	srv, err := launch.StartRedis(context.Background(), launch.RedisConfig{
		Bin: Require(tb, "redis-server"),
		// TempDir registers its removal before our cleanup is registered,
		// so cleanups (run last-in first-out) kill the server first and
		// the directory is not removed under a running server.
		Dir:        tb.TempDir(),
		Persistent: cfg.persistent,
		Conf:       cfg.conf,
		Sentinel:   cfg.sentinel,
		Cluster:    cfg.cluster,
		Args:       cfg.extra,
	})
	if err != nil {
		tb.Fatalf("testserver: starting redis-server: %v", err)
	}
	r := &Redis{srv: srv, cfg: cfg}
	tb.Cleanup(func() { r.Kill(tb) })
	return r
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (r *Redis) Addr() string { return r.srv.Addr() }

// Port returns the server's TCP port.
func (r *Redis) Port() int { return r.srv.Port() }

// Dir returns the server's working directory, where its log (redis.log) and
// any persistence files live.
func (r *Redis) Dir() string { return r.srv.Dir() }

// Pause freezes the server with SIGSTOP. Connections stay open and new
// ones still complete the TCP handshake, but nothing is answered until
// Resume: to a client this looks like a hung server or a lost network.
// Pausing a server that is not running does nothing.
func (r *Redis) Pause(tb testing.TB) {
	tb.Helper()
	r.check(tb, "pausing", r.srv.Pause())
}

// Resume undoes Pause with SIGCONT.
func (r *Redis) Resume(tb testing.TB) {
	tb.Helper()
	r.check(tb, "resuming", r.srv.Resume())
}

// check reports the error of a signal: a skip where the system cannot
// send it, nothing for a process that has exited.
func (r *Redis) check(tb testing.TB, what string, err error) {
	tb.Helper()
	switch {
	case err == nil || errors.Is(err, launch.ErrExited):
	case errors.Is(err, errors.ErrUnsupported):
		tb.Skipf("testserver: %s a process is not supported on this OS", what)
	default:
		tb.Fatalf("testserver: %s redis-server on %s: %v", what, r.Addr(), err)
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Writes that were not yet on disk are lost. Killing a server that
// is not running does nothing.
func (r *Redis) Kill(tb testing.TB) {
	tb.Helper()
	if err := r.srv.Kill(); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
}

// Stop shuts the server down gracefully with SIGTERM and waits for it to
// exit, falling back to SIGKILL after about 10 s. Stopping a server that
// is not running does nothing.
func (r *Redis) Stop(tb testing.TB) {
	tb.Helper()
	if err := r.srv.Stop(); err != nil {
		tb.Fatalf("testserver: %v", err)
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
	if err := r.srv.Restart(context.Background()); err != nil {
		tb.Fatalf("testserver: restarting redis-server: %v", err)
	}
}

// Do sends a command to the server and returns the reply as described for
// the package-level [Do], with a deadline of 5 s. Failures are returned,
// not reported to tb, so that tests can assert on them.
func (r *Redis) Do(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	return Do(r.Addr(), doTimeout, args...)
}

// Commands returns the number of commands the server has run, those that
// scripts run included, leaving out INFO (which reads the count): a test
// compares it before and after the calls it counts.
func (r *Redis) Commands(tb testing.TB) int {
	tb.Helper()
	out := r.mustDo(tb, "INFO", "commandstats")
	total := 0
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		name, stats, _ := strings.Cut(rest, ":calls=")
		if !ok || name == "info" {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(stats, ",", 2)[0])
		total += n
	}
	return total
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
