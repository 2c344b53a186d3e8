package torture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// Fault classes a run may ask for.
const (
	ClassPause  = "pause"  // SIGSTOP a worker past its TTL, then SIGCONT
	ClassKill   = "kill"   // SIGKILL a worker and start a new one
	ClassCut    = "cut"    // cut or blackhole a worker's connections
	ClassServer = "server" // pause, kill or restart a server (needs Servers)
)

// Classes lists the fault classes.
var Classes = []string{ClassPause, ClassKill, ClassCut, ClassServer}

// Config describes a run.
type Config struct {
	// URL names the backend. Workers reach every host:port of it through
	// a proxy of their own, for the cut faults.
	URL string
	// Key is the lock's name; "" picks a fresh one.
	Key      string
	Workers  int
	Duration time.Duration
	TTL      time.Duration
	// Faults are the classes to inject (see Classes).
	Faults []string
	Seed   uint64
	// Slack is how late after ValidUntil a Done may close.
	Slack time.Duration
	// SlowPercent is the share of holdings that sleep past their lease
	// before writing.
	SlowPercent int
	// Servers are the servers the run started itself, for the server
	// faults; nil when it uses servers it does not own.
	Servers []launch.Server
	// Primary, if set, returns the server that takes the writes now (the
	// master of a replicated deployment), or nil if that is unknown;
	// server faults then aim at it half the time.
	Primary func() launch.Server
	// Failover, if set, adds failovers to the server faults: it makes the
	// deployment promote a replica and returns once it has. With pause,
	// it does so as a hung master would, by pausing the master until the
	// deployment gives up on it; without, by asking for one.
	Failover func(ctx context.Context, pause bool) error
	// Restart, if set, restarts a server in place of its own Restart
	// method: a server of a replicated deployment must come back in the
	// role it has now.
	Restart func(ctx context.Context, srv launch.Server) error
	// Routes, for a URL whose clients find their servers themselves
	// (Sentinel), lists every address those clients may dial. Each worker
	// then reaches each of them through a proxy of its own, for the cut
	// faults, and gets the map from real addresses to its proxies in the
	// environment variable RoutesEnv; it must dial through it.
	Routes []string
	// Command returns the command that runs one worker: this program
	// with its hidden worker subcommand. Run appends [WorkerArgs] and
	// sets the backend URL in the environment variable URLEnv.
	Command func(args []string) *exec.Cmd
	// Progress, if not nil, gets a line every ten seconds.
	Progress io.Writer
}

// URLEnv is the environment variable through which a worker gets its
// backend URL (not its command line: the URL may hold a password).
const URLEnv = "DISTLOCK_URL"

// RoutesEnv carries a worker's routes (see Config.Routes), as
// "addr=proxy,addr=proxy".
const RoutesEnv = "DISTLOCK_TORTURE_ROUTES"

// SecretEnv carries the secret a worker shows the harness.
const SecretEnv = "DISTLOCK_TORTURE_SECRET"

// Timeouts of the harness.
const (
	helloTimeout = 30 * time.Second // a worker process must say hello by then
	helloGrace   = time.Second      // for the hello of a worker already gone to be read
	stopGrace    = 10 * time.Second // and exit by then after a stop
)

// ErrBadConfig is returned by Run for a configuration it cannot run.
var ErrBadConfig = errors.New("torture: bad configuration")

// Validate reports what is wrong with c, wrapping ErrBadConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Workers < 1 || c.Workers > 64:
		return bad("workers %d is not between 1 and 64", c.Workers)
	case c.Duration <= 0:
		return bad("duration %v is not positive", c.Duration)
	case c.TTL < 50*time.Millisecond || c.TTL > time.Minute:
		return bad("ttl %v is not between 50ms and 1m", c.TTL)
	case c.Slack < 0:
		return bad("slack %v is negative", c.Slack)
	case c.SlowPercent < 0 || c.SlowPercent > 100:
		return bad("slow share %d%% is not between 0 and 100", c.SlowPercent)
	case c.Command == nil:
		return bad("no worker command")
	}
	for _, f := range c.Faults {
		switch f {
		case ClassPause, ClassKill, ClassCut, ClassServer:
		default:
			return bad("unknown fault %q (known: %s)", f, strings.Join(Classes, ", "))
		}
	}
	_, err := proxiedHosts(c.URL)
	if err != nil && !errors.Is(err, errNoProxy) {
		return err
	}
	for _, r := range c.Routes {
		if _, _, err := net.SplitHostPort(r); err != nil {
			return bad("route %q: want host:port", r)
		}
	}
	return nil
}

// Injectable returns nil if a run of c can inject faults of class, or an
// error wrapping ErrBadConfig that says why it cannot: the server faults
// need servers the run started, the cut faults a connection that a proxy
// can carry.
func (c *Config) Injectable(class string) error {
	switch class {
	case ClassServer:
		if len(c.Servers) == 0 {
			return fmt.Errorf("%w: fault %q needs servers the run starts itself", ErrBadConfig, class)
		}
	case ClassCut:
		if len(c.Routes) > 0 {
			return nil
		}
		_, err := proxiedHosts(c.URL)
		switch {
		case errors.Is(err, errNoNetwork):
			return fmt.Errorf("%w: fault %q: this backend has no network connection to cut", ErrBadConfig, class)
		case errors.Is(err, errNoProxy):
			return fmt.Errorf("%w: fault %q: this backend's clients find their servers themselves, so a proxy cannot carry their traffic", ErrBadConfig, class)
		case err != nil:
			return err
		}
	}
	return nil
}

// classOf returns the class of a fault kind.
func classOf(kind string) string {
	switch kind {
	case FaultPause:
		return ClassPause
	case FaultKill:
		return ClassKill
	case FaultCut, FaultBlackhole:
		return ClassCut
	}
	return ClassServer
}

// connectionScoped reports whether the locks of the backend that raw names
// end the moment their holder's connection does: SQL locks with
// lock=connection (see package sqllock's WithConnectionScope).
func connectionScoped(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql", "mysql":
		return u.Query().Get("lock") == "connection"
	}
	return false
}

// errNoProxy: the URL's scheme finds its servers by itself (Sentinel,
// Cluster), so a proxy in front of the given hosts would not carry the
// lock's traffic.
var errNoProxy = errors.New("torture: this scheme's traffic cannot be proxied")

// errNoNetwork: the URL names no server at all (a file, as for SQLite), so
// there is no connection to cut.
var errNoNetwork = fmt.Errorf("%w: no network", errNoProxy)

// proxiedHosts returns the host:port list of the URL raw, which workers
// reach through proxies of their own. Every scheme names its servers as
// host:port[,host:port...], but some only to discover the others.
func proxiedHosts(raw string) ([]string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: malformed URL: %v", ErrBadConfig, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "mem":
		return nil, fmt.Errorf("%w: mem:// locks live inside one process, and the workers are separate processes", ErrBadConfig)
	case strings.HasSuffix(scheme, "+sentinel"), strings.HasSuffix(scheme, "+cluster"):
		return nil, errNoProxy
	case u.Host == "" && u.Opaque == "":
		return nil, errNoNetwork
	}
	hosts := strings.Split(u.Host, ",")
	for _, h := range hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("%w: address %q in the URL: want host:port", ErrBadConfig, h)
		}
	}
	return hosts, nil
}

// ParseRoutes reads the value of RoutesEnv: a map from the addresses a
// worker's client asks for to those it must dial instead.
func ParseRoutes(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		from, to, ok := strings.Cut(kv, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("torture: malformed route %q in %s", kv, RoutesEnv)
		}
		out[from] = to
	}
	return out, nil
}

// rewriteHosts returns raw with its hosts replaced by addrs, in order.
func rewriteHosts(raw string, addrs []string) string {
	u, _ := url.Parse(raw) // parsed before
	v := *u
	v.Host = strings.Join(addrs, ",")
	return v.String()
}

// slot is one worker position: its current process and its proxies.
type slot struct {
	n       int
	proxies []*launch.Proxy
	url     string
	routes  string // RoutesEnv's value, or ""

	mu      sync.Mutex
	inc     int
	proc    *launch.Proc
	w       *Worker
	out     *lineWriter
	hello   chan struct{}              // closed when the current process said hello
	ready   chan struct{}              // closed once spawn has recorded the current process
	killed  map[*launch.Proc]time.Time // processes killed on purpose, and when
	faulted bool                       // a fault is under way on this slot
}

// harness runs one torture run.
type harness struct {
	cfg    Config
	secret string
	ln     net.Listener
	rec    *recorder
	reg    Register
	slots  []*slot
	start  time.Time
	proxy  bool // workers go through proxies
	wg     sync.WaitGroup
	faults faultCounter

	mu      sync.Mutex
	stopped bool // workers are being stopped: no replacements
	notes   []string
}

// Run performs a torture run as cfg says and checks its history. It
// returns an error only when the run could not be carried out (bad
// configuration, workers that could not start); the findings say whether
// the backend kept its promises.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A run that asks for a fault it cannot inject would test nothing of it.
	for _, class := range cfg.Faults {
		if err := cfg.Injectable(class); err != nil {
			return nil, err
		}
	}
	if cfg.Key == "" {
		cfg.Key = "distlock-torture:" + randomHex(6)
	}
	h := &harness{cfg: cfg, secret: randomHex(16)}
	hosts, err := proxiedHosts(cfg.URL)
	h.proxy = err == nil || len(cfg.Routes) > 0
	h.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer h.ln.Close()
	defer h.closeProxies()
	for i := range cfg.Workers {
		s := &slot{n: i, url: cfg.URL}
		h.slots = append(h.slots, s) // before its proxies, which closeProxies closes
		if len(cfg.Routes) > 0 {
			var routes []string
			for _, addr := range cfg.Routes {
				p, err := launch.StartProxy(addr)
				if err != nil {
					return nil, err
				}
				s.proxies = append(s.proxies, p)
				routes = append(routes, addr+"="+p.Addr())
			}
			s.routes = strings.Join(routes, ",")
		} else if h.proxy {
			var addrs []string
			for _, host := range hosts {
				p, err := launch.StartProxy(host)
				if err != nil {
					return nil, err
				}
				s.proxies = append(s.proxies, p)
				addrs = append(addrs, p.Addr())
			}
			s.url = rewriteHosts(cfg.URL, addrs)
		}
	}
	h.start = time.Now()
	h.rec = newRecorder(h.start, cfg.TTL)
	go h.accept()

	for _, s := range h.slots {
		if err := h.spawn(s); err != nil {
			h.stopWorkers()
			return nil, err
		}
	}
	for _, s := range h.slots {
		if err := h.awaitHello(ctx, s); err != nil {
			h.stopWorkers()
			return nil, err
		}
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	sched := newScheduler(h, cfg.Seed)
	go h.progress(runCtx)
	sched.run(runCtx)
	sched.endAll()

	h.stopWorkers()
	h.wg.Wait()
	end := time.Now()
	hist := h.rec.finish(end, h.reg.Ops())
	opts := CheckOptions{
		Slack:            cfg.Slack,
		StallLimit:       stallLimit(cfg.TTL),
		Recovery:         recovery(cfg.TTL),
		LinTimeout:       linTimeout,
		ConnectionScoped: connectionScoped(cfg.URL),
	}
	find := Check(hist, opts)
	rep := newReport(cfg, hist, find, opts, h.faults.snapshot())
	rep.Notes = append(rep.Notes, h.notes...)
	if ctx.Err() != nil {
		rep.Notes = append(rep.Notes, "interrupted before the planned duration")
	}
	return rep, nil
}

// linTimeout bounds the linearizability check.
const linTimeout = 60 * time.Second

// stallLimit is how long the lock may stay free while a healthy worker
// waits: a lease that ran out, a retry's back-off, and a wide margin.
func stallLimit(ttl time.Duration) time.Duration { return 2*ttl + 2*time.Second }

// recovery is how long a faulted worker or server counts as faulty after
// the fault ended: reconnecting and backing off.
func recovery(ttl time.Duration) time.Duration { return max(2*time.Second, 2*ttl) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (h *harness) closeProxies() {
	for _, s := range h.slots {
		for _, p := range s.proxies {
			_ = p.Close()
		}
	}
}

// afterStart, if set by a test, runs between starting a worker process and
// recording it, to widen the window in which its hello may come first.
var afterStart func()

// WorkerArgs returns the command-line arguments of a worker process.
func WorkerArgs(c WorkerConfig) []string {
	return []string{
		"--harness", c.Harness,
		"--slot", strconv.Itoa(c.Slot),
		"--inc", strconv.Itoa(c.Inc),
		"--key", c.Key,
		"--ttl", c.TTL.String(),
		"--seed", strconv.FormatUint(c.Seed, 10),
		"--slow", strconv.Itoa(c.SlowPercent),
	}
}

// spawn starts the next process of slot s.
func (h *harness) spawn(s *slot) error {
	// The new process may say hello before Start returns: its slot state
	// is reset first, and serve waits for ready before it uses s.w.
	ready := make(chan struct{})
	defer close(ready)
	s.mu.Lock()
	s.inc++
	s.out, s.w, s.ready = nil, nil, ready
	s.hello = make(chan struct{})
	wc := WorkerConfig{Harness: h.ln.Addr().String(), Slot: s.n, Inc: s.inc, Key: h.cfg.Key,
		TTL: h.cfg.TTL, Seed: h.cfg.Seed, SlowPercent: h.cfg.SlowPercent}
	s.mu.Unlock()
	cmd := h.cfg.Command(WorkerArgs(wc))
	cmd.Env = append(cmd.Environ(), URLEnv+"="+s.url, SecretEnv+"="+h.secret)
	if s.routes != "" {
		cmd.Env = append(cmd.Env, RoutesEnv+"="+s.routes)
	}
	stderr := &tail{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	p, err := launch.Start(cmd)
	if err != nil {
		return fmt.Errorf("torture: starting worker %s: %w", workerID(s.n, wc.Inc), err)
	}
	if afterStart != nil {
		afterStart()
	}
	w := h.rec.started(s.n, wc.Inc, p.Pid(), time.Now(), stderr)
	s.mu.Lock()
	s.proc, s.w = p, w
	s.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		<-p.Done()
		end := time.Now()
		s.mu.Lock()
		killedAt, killed := s.killed[p]
		s.mu.Unlock()
		if killed {
			end = killedAt
		}
		// Workers exit 0 when told to stop; any other end is a crash,
		// which may hide violations (see VCrash).
		code := p.ExitCode()
		crashed := !killed && (code != 0 || !h.isStopped())
		h.rec.ended(w, end, killed, crashed, code)
	}()
	return nil
}

// awaitHello waits until slot s's current process has connected.
func (h *harness) awaitHello(ctx context.Context, s *slot) error {
	s.mu.Lock()
	hello, p, w := s.hello, s.proc, s.w
	s.mu.Unlock()
	t := time.NewTimer(helloTimeout)
	defer t.Stop()
	select {
	case <-hello:
		return nil
	case <-p.Done():
		// A worker that said hello and then ended at once (a crash at its
		// first grant) may be seen gone before its hello is read: that is
		// a worker's end, which the run records, not a failure to start.
		grace := time.NewTimer(helloGrace)
		defer grace.Stop()
		select {
		case <-hello:
			return nil
		case <-grace.C:
		}
		return fmt.Errorf("torture: worker %s exited at start (%v): %s", w.ID, p.Err(), strings.TrimSpace(w.stderr.String()))
	case <-t.C:
		return fmt.Errorf("torture: worker %s did not connect within %v: %s", w.ID, helloTimeout, strings.TrimSpace(w.stderr.String()))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// accept serves worker connections.
func (h *harness) accept() {
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer conn.Close()
			h.serve(conn)
		}()
	}
}

// serve handles one worker's connection: its hello, its events and its
// register operations.
func (h *harness) serve(conn net.Conn) {
	lr := newLineReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
	var hello msg
	if err := lr.next(&hello); err != nil || hello.Kind != msgHello || hello.Secret != h.secret ||
		hello.Slot < 0 || hello.Slot >= len(h.slots) {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	s := h.slots[hello.Slot]
	out := &lineWriter{w: conn}
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready == nil {
		return
	}
	<-ready
	s.mu.Lock()
	if hello.Inc != s.inc || s.out != nil || s.w == nil {
		s.mu.Unlock()
		return
	}
	w := s.w
	s.out = out
	close(s.hello)
	stopped := h.isStopped()
	s.mu.Unlock()
	if stopped {
		_ = out.send(reply{Stop: true})
	}
	for {
		var m msg
		if err := lr.next(&m); err != nil {
			return
		}
		switch m.Kind {
		case msgRead, msgWrite:
			call := time.Now()
			holding := fmt.Sprintf("%s.%d", w.ID, m.H)
			op := h.reg.Do(RegOp{Worker: w.ID, Holding: holding, Write: m.Kind == msgWrite,
				Token: m.Token, Value: m.Value, Late: m.Late}, call)
			h.rec.event(w, m)
			if err := out.send(reply{ID: m.ID, OK: op.OK, State: op.State}); err != nil {
				return
			}
		default:
			h.rec.event(w, m)
		}
	}
}

func (h *harness) isStopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// stopWorkers tells every worker to stop, waits for them to exit, and
// kills those that do not.
func (h *harness) stopWorkers() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	for _, s := range h.slots {
		s.mu.Lock()
		out, p := s.out, s.proc
		s.mu.Unlock()
		if p == nil {
			continue
		}
		_ = p.Resume()
		if out != nil {
			_ = out.send(reply{Stop: true})
		}
	}
	deadline := time.Now().Add(stopGrace + h.cfg.TTL)
	for _, s := range h.slots {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p == nil {
			continue
		}
		t := time.NewTimer(max(time.Until(deadline), 0))
		select {
		case <-p.Done():
		case <-t.C:
		}
		t.Stop()
		if p.Exited() {
			continue
		}
		// Stuck: its holdings end here, like those of a killed worker.
		s.markKilled(p)
		p.Kill(stopGrace)
		h.mu.Lock()
		h.notes = append(h.notes, fmt.Sprintf("worker %d.%d did not stop within %v and was killed", s.n, s.inc, stopGrace+h.cfg.TTL))
		h.mu.Unlock()
	}
}

// progress prints a line every ten seconds.
func (h *harness) progress(ctx context.Context) {
	if h.cfg.Progress == nil {
		return
	}
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.rec.mu.Lock()
			n := len(h.rec.h.Holdings)
			h.rec.mu.Unlock()
			fmt.Fprintf(h.cfg.Progress, "torture: %v: %d holdings, %d faults\n",
				now.Sub(h.start).Round(time.Second), n, h.faults.total())
		}
	}
}

// note adds a line to the report's notes.
func (h *harness) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, s)
}

// markKilled records that p is about to be killed on purpose, and returns
// the time: its holdings end then, and that is not a violation of the
// lock's promises. Call it before the signal: a connection-scoped lock is
// freed as soon as the process is gone.
func (s *slot) markKilled(p *launch.Proc) time.Time {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killed == nil {
		s.killed = map[*launch.Proc]time.Time{}
	}
	s.killed[p] = now
	return now
}
