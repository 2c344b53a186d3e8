package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/torture"
)

// tortureWorkerCommand is the hidden subcommand that runs one worker of
// 'distlock torture'.
const tortureWorkerCommand = "torture-worker"

// exitViolation is torture's status when the checks found a violation.
const exitViolation = 1

const tortureSynopsis = "distlock torture [--url URL | --servers KIND] [--workers 8] [--duration 60s] [--ttl 500ms]\n" +
	"      [--faults pause,kill,cut,server] [--seed N] [--json FILE] [--timeline FILE.svg|FILE.html]"

const tortureAbout = `Torture checks a lock deployment under faults, as Jepsen does, and
reports whether the lock kept its promises.

Workers, each a process of its own, take one lock over and over. Under it
each reads and writes a fenced register that this command keeps: the
register rejects a write whose fencing token is lower than the highest it
has accepted. One holding in ten sleeps past its lease before writing, the
classic process pause. Meanwhile faults are injected on a schedule drawn
from --seed (printed, so that a run can be replayed):

  pause   SIGSTOP a worker (often the holder) past its TTL, then SIGCONT
  kill    SIGKILL a worker and start a new one
  cut     reset or blackhole a worker's connections to the backend (each
          worker reaches every server through a proxy of its own; not for
          Sentinel and Cluster URLs given with --url, whose clients find
          the servers)
  server  pause, kill -9 and restart, or restart a server (needs --servers);
          with Sentinel, also fail over: on request, or by pausing the
          master until the sentinels replace it

Then it checks the whole history: accepted tokens only increase; no token
is granted twice, nor out of order; no lock is granted while another
holder's lease is valid; every Done closes by ValidUntil plus --slack (time
a worker spent stopped is not held against it); the lock never stays free
for long while a healthy worker waits; and the register's history is
linearizable (porcupine). It prints a table, and exits 1 if any check
failed, and also if the run proved less than asked: no lock was granted,
or a fault class asked for was never injected (the schedule injects one
fault every half to two TTLs: a run of a few TTLs may miss a class).
A fault the deployment cannot take (cut without a connection a proxy can
carry, server without --servers) is refused when asked for, and left out
of the default with a note. Overlapping "believed held" windows are counted, not failed: a
paused holder believes it holds after its lease ended, and that is what the
fence is for.

--servers starts servers of its own instead of --url, on free loopback
ports: redis (one server, append-only file fsynced on every write),
redis-nopersist (one server without persistence: a restart loses the lock
and its token counter), redlock (three servers, each with the fsynced
append-only file), sentinel (a master, two replicas and three sentinels,
with the fsynced append-only file; locks wait for both replicas, the
URL's replicas=2, and a failover lasts until the deployment is whole
again), sentinel-one (locks wait for one replica: a failover can lose a
lock, and the run reports it), sentinel-nowait (no waiting: more such
losses), zk (a ZooKeeper ensemble of three
servers; workers' sessions last 2s), etcd (a cluster of three members,
built from this source tree unless $DISTLOCK_ETCD names a server),
postgres and mariadb (a database
server each, its lease table), postgres-connection and mariadb-connection
(the same servers, with the database's own locks held on a connection
each, lock=connection: a lock ends the moment its holder's connection
does, and the exclusion check knows it; so it does for any --url with
lock=connection), sqlite (a database file in a
temporary directory: no server, so no cut or server faults). Each worker
reaches the sentinels and the servers they name through proxies of its
own. Only with --servers is the server fault available. Exit status 1 means a violation was found.
`

// serverKinds are the deployments --servers can start.
var serverKinds = []string{"redis", "redis-nopersist", "redlock", "sentinel", "sentinel-one", "sentinel-nowait", "zk", "etcd",
	"postgres", "mariadb", "postgres-connection", "mariadb-connection", "sqlite"}

type tortureOptions struct {
	url      string
	servers  string
	workers  int
	duration time.Duration
	ttl      time.Duration
	faults   string
	seed     uint64
	slack    time.Duration
	json     string
	timeline string
}

func (c *cli) tortureCmd(ctx context.Context, args []string) int {
	o := tortureOptions{workers: 8, duration: time.Minute, ttl: 500 * time.Millisecond, slack: 100 * time.Millisecond}
	fs := c.flagSet("torture", tortureSynopsis, tortureAbout)
	fs.StringVar(&o.url, "url", "", "backend `URL` to check (default $"+urlEnv+")")
	fs.StringVar(&o.servers, "servers", "", "start servers of its own: "+strings.Join(serverKinds, ", "))
	fs.IntVar(&o.workers, "workers", o.workers, "number of worker processes")
	fs.DurationVar(&o.duration, "duration", o.duration, "how long to run")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "lease length of the workers' locks")
	fs.StringVar(&o.faults, "faults", "", "faults to inject, comma-separated, or none (default pause,kill,cut, and server with --servers, less those the deployment cannot take)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the fault schedule (default random, printed)")
	fs.DurationVar(&o.slack, "slack", o.slack, "how late after ValidUntil a Done may close")
	fs.StringVar(&o.json, "json", "", "write the report as JSON to `FILE` (- for standard output)")
	fs.StringVar(&o.timeline, "timeline", "", "draw holdings, faults and rejected writes to `FILE` (.svg or .html)")
	if code, done := c.parse(fs, args); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 0 {
		return c.usageError("torture", "unexpected argument %q", fs.Arg(0))
	}
	if o.servers != "" && !contains(serverKinds, o.servers) {
		return c.usageError("torture", "--servers %q: want one of %s", o.servers, strings.Join(serverKinds, ", "))
	}
	if o.servers != "" && o.url != "" {
		return c.usageError("torture", "--url and --servers exclude each other")
	}
	if o.servers == "" {
		o.url = c.backendURL(o.url)
		if msg := checkURL(o.url); msg != "" {
			return c.usageError("torture", "%s", msg)
		}
	}
	// SQLite has no server process to stop.
	faults, msg := parseFaults(o.faults, set["faults"], o.servers != "" && o.servers != "sqlite")
	if msg != "" {
		return c.usageError("torture", "%s", msg)
	}
	if o.timeline != "" {
		if ext := strings.ToLower(filepath.Ext(o.timeline)); ext != ".svg" && ext != ".html" {
			return c.usageError("torture", "--timeline %q: want a file name ending in .svg or .html", o.timeline)
		}
	}
	if !set["seed"] {
		o.seed = rand.Uint64() % 1_000_000_000
	}
	self := c.self
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return c.fail(exitSoftware, "torture", "cannot find this program to run the workers: %v", err)
		}
		self = exe
	}
	cfg := torture.Config{
		URL: o.url, Workers: o.workers, Duration: o.duration, TTL: o.ttl, Faults: faults,
		Seed: o.seed, Slack: o.slack, SlowPercent: 10,
		Command: func(args []string) *exec.Cmd {
			return exec.Command(self, append([]string{tortureWorkerCommand}, args...)...)
		},
		Progress: c.stderr,
	}
	if o.servers != "" {
		// Checked with a placeholder; the real URL comes with the servers.
		cfg.URL = "redis://127.0.0.1:1/0"
	}
	if err := cfg.Validate(); err != nil {
		return c.usageError("torture", "%s", badConfigText(err))
	}

	// Ctrl-C ends the run early; the report still covers what ran.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.servers != "" {
		srv, err := startTortureServers(ctx, o.servers)
		if err != nil {
			return c.fail(exitUnavailable, "torture", "starting servers: %v", err)
		}
		defer srv.close()
		srv.configure(&cfg)
	}
	// A fault asked for that cannot be injected is refused: the run would
	// test nothing of it. One of the defaults is left out, with a note.
	var notes []string
	if !set["faults"] {
		cfg.Faults = slices.DeleteFunc(cfg.Faults, func(class string) bool {
			err := cfg.Injectable(class)
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s faults left out: %s", class, badConfigText(err)))
			}
			return err != nil
		})
	}
	for _, class := range cfg.Faults {
		if err := cfg.Injectable(class); err != nil {
			return c.usageError("torture", "%s", badConfigText(err))
		}
	}
	if o.servers == "" {
		if code := c.probeBackend(ctx, cfg.URL, o.ttl); code != exitOK {
			return code
		}
	}
	fmt.Fprintf(c.stderr, "torture: %d workers for %v against %s, seed %d\n", o.workers, o.duration, redactURL(cfg.URL), o.seed)
	rep, err := torture.Run(ctx, cfg)
	if errors.Is(err, torture.ErrBadConfig) {
		return c.usageError("torture", "%s", badConfigText(err))
	}
	if err != nil {
		return c.fail(exitUnavailable, "torture", "%v", err)
	}
	rep.Servers = o.servers
	rep.Notes = append(notes, rep.Notes...)
	if o.json == "-" {
		if err := rep.WriteJSON(c.stdout); err != nil {
			return c.fail(exitSoftware, "torture", "%v", err)
		}
	} else {
		rep.WriteTable(c.stdout)
		if o.json != "" {
			if err := writeFile(o.json, rep.WriteJSON); err != nil {
				return c.fail(exitSoftware, "torture", "writing the report: %v", err)
			}
		}
	}
	if o.timeline != "" {
		write := rep.WriteSVG
		if strings.EqualFold(filepath.Ext(o.timeline), ".html") {
			write = rep.WriteHTML
		}
		if err := writeFile(o.timeline, write); err != nil {
			return c.fail(exitSoftware, "torture", "writing the timeline: %v", err)
		}
	}
	if rep.Failed() {
		return exitViolation
	}
	return exitOK
}

// badConfigText is the message of a torture.ErrBadConfig error without the
// error's prefix.
func badConfigText(err error) string {
	return strings.TrimPrefix(err.Error(), torture.ErrBadConfig.Error()+": ")
}

// parseFaults reads --faults; explicit says the flag was given.
func parseFaults(list string, explicit, servers bool) ([]string, string) {
	if !explicit {
		f := []string{torture.ClassPause, torture.ClassKill, torture.ClassCut}
		if servers {
			f = append(f, torture.ClassServer)
		}
		return f, ""
	}
	if list == "none" || list == "" {
		return nil, ""
	}
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		switch {
		case !contains(torture.Classes, f):
			return nil, fmt.Sprintf("--faults: unknown fault %q (known: %s, or none)", f, strings.Join(torture.Classes, ", "))
		case f == torture.ClassServer && !servers:
			return nil, "--faults server needs --servers with a server process (not sqlite): torture only stops servers it started"
		case !contains(out, f):
			out = append(out, f)
		}
	}
	return out, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// probeBackend takes and releases one lock, so that a backend that cannot
// be reached is reported before any worker starts.
func (c *cli) probeBackend(ctx context.Context, rawURL string, ttl time.Duration) int {
	b, code := c.open(ctx, "torture", rawURL, time.Now().Add(contactTimeout))
	if b == nil {
		return code
	}
	defer b.close()
	l, err := tryUntilAnswered(ctx, b.mutex("distlock-torture:probe:"+randomID(), distlock.WithTTL(max(ttl, time.Second))), b, time.Now().Add(contactTimeout))
	if err != nil {
		return c.backendFailed("torture", "backend unavailable", err)
	}
	_ = l.Unlock(ctx)
	return exitOK
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// workerOpenTimeout bounds how long a worker tries to open its backend.
const workerOpenTimeout = time.Minute

// openWorkerBackend opens the backend at rawURL for a worker, trying again
// for up to workerOpenTimeout: a worker that replaces a killed one may
// start while its connections are cut or a server is down, and a backend
// that connects when opened (SQL) fails then. A bad URL fails at once.
func (c *cli) openWorkerBackend(ctx context.Context, rawURL string) (*backend, int) {
	deadline := time.Now().Add(workerOpenTimeout)
	for {
		var msg strings.Builder
		quiet := *c
		quiet.stderr = &msg
		attempt := time.Now().Add(contactTimeout)
		if attempt.After(deadline) {
			attempt = deadline
		}
		b, code := quiet.open(ctx, tortureWorkerCommand, rawURL, attempt)
		if b != nil {
			return b, code
		}
		if code == exitUsage || ctx.Err() != nil || time.Now().After(deadline) {
			fmt.Fprint(c.stderr, msg.String())
			return nil, code
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// tortureWorkerCmd runs one worker of 'distlock torture'. The backend URL
// comes from the environment, so that a password does not show in ps.
func (c *cli) tortureWorkerCmd(ctx context.Context, args []string) int {
	var wc torture.WorkerConfig
	fs := c.flagSet(tortureWorkerCommand, tortureWorkerCommand+" --harness ADDR --slot N --inc N --key KEY --ttl D --seed N --slow P",
		"Runs one worker of 'distlock torture'; not meant to be run by hand.\n")
	fs.StringVar(&wc.Harness, "harness", "", "the harness's address")
	fs.IntVar(&wc.Slot, "slot", 0, "worker slot")
	fs.IntVar(&wc.Inc, "inc", 0, "incarnation in the slot")
	fs.StringVar(&wc.Key, "key", "", "name of the lock")
	fs.DurationVar(&wc.TTL, "ttl", 0, "lease length")
	fs.Uint64Var(&wc.Seed, "seed", 0, "seed")
	fs.IntVar(&wc.SlowPercent, "slow", 0, "share of slow holdings, in percent")
	if code, done := c.parse(fs, args); done {
		return code
	}
	if wc.Harness == "" || wc.Key == "" || wc.TTL <= 0 || fs.NArg() > 0 {
		return c.usageError(tortureWorkerCommand, "need --harness, --key and --ttl")
	}
	wc.Secret = c.getenv(torture.SecretEnv)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	var b *backend
	if routes := c.getenv(torture.RoutesEnv); routes != "" {
		var (
			close func()
			code  int
		)
		if b, close, code = c.openRouted(c.getenv(torture.URLEnv), routes); b == nil {
			return code
		}
		defer close()
	} else {
		var code int
		if b, code = c.openWorkerBackend(ctx, c.getenv(torture.URLEnv)); b == nil {
			return code
		}
		defer b.close()
	}
	client := distlock.New(b, distlock.WithReleaseTimeout(cleanupTimeout))
	if err := torture.RunWorker(ctx, wc, client); err != nil {
		if errors.Is(err, context.Canceled) {
			return exitOK
		}
		return c.fail(exitSoftware, tortureWorkerCommand, "%v", err)
	}
	return exitOK
}
