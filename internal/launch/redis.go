package launch

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
	"sync"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer PING after
	// being started; a healthy one needs a few milliseconds.
	readyTimeout = 10 * time.Second
	// exitTimeout bounds how long a signalled server may take to exit.
	exitTimeout = 10 * time.Second
	// startAttempts is how often a start is retried when the chosen port
	// was taken between picking it and the server binding it.
	startAttempts = 5

	logName   = "redis.log"
	stdioName = "stdio.log"
	confName  = "redis.conf"
)

// ErrNoRedisServer is returned by [StartRedis] when the redis-server binary
// cannot be found.
var ErrNoRedisServer = errors.New("launch: redis-server not found in PATH")

var errAddrInUse = errors.New("address already in use")

// RedisConfig describes a redis-server to start. The zero value is a
// standalone server without persistence.
type RedisConfig struct {
	// Bin is the redis-server executable; "" looks it up in PATH.
	Bin string
	// Dir is the server's working directory; "" makes a temporary one that
	// Close removes.
	Dir string
	// Persistent turns on the append-only file with an fsync per write, so
	// that every acknowledged write survives Kill and Restart. Without it
	// a restarted server comes back empty.
	Persistent bool
	// Conf, if not empty, is written to a configuration file passed first
	// on the command line; sentinels need one to keep their state in.
	Conf string
	// Sentinel starts the server in sentinel mode (with Conf).
	Sentinel bool
	// Cluster starts a cluster node: cluster mode on, its state in
	// nodes.conf, a node timeout of 2 s and a cluster bus on a second free
	// port ([Redis.BusPort]).
	Cluster bool
	// Args are appended to the command line and so override the defaults.
	Args []string
}

// Redis is one redis-server process on a fixed port of 127.0.0.1. Its
// methods are safe for concurrent use; they act on the current process,
// which Restart replaces.
type Redis struct {
	cfg     RedisConfig
	port    int
	busPort int // cluster bus; 0 outside a cluster
	tempDir bool

	mu       sync.Mutex
	proc     *Proc
	logStart map[string]int64
}

// StartRedis starts redis-server on a free port of 127.0.0.1 as cfg says,
// with no snapshots and no delay before replication syncs, and returns once
// it answers PING, or an error with the tail of its log. The caller must
// Close it.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	if cfg.Cluster && cfg.Sentinel {
		return nil, errors.New("launch: a server cannot be both a sentinel and a cluster node")
	}
	if cfg.Bin == "" {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, ErrNoRedisServer
		}
		cfg.Bin = bin
	}
	r := &Redis{cfg: cfg}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "distlock-redis-")
		if err != nil {
			return nil, err
		}
		r.cfg.Dir, r.tempDir = dir, true
	}
	for attempt := 1; ; attempt++ {
		n := 1
		if cfg.Cluster {
			n = 2
		}
		ports, err := FreePorts(n)
		if err == nil {
			r.port = ports[0]
			if cfg.Cluster {
				r.busPort = ports[1]
			}
			err = r.launch(ctx)
		}
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			r.removeDir()
			return nil, err
		}
	}
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port returns the server's TCP port.
func (r *Redis) Port() int { return r.port }

// BusPort returns the port of a cluster node's cluster bus, and 0 for a
// server outside a cluster.
func (r *Redis) BusPort() int { return r.busPort }

// Dir returns the server's working directory, where its log (redis.log)
// and any persistence files live.
func (r *Redis) Dir() string { return r.cfg.Dir }

// Persistent reports whether the server keeps its data across Restart.
func (r *Redis) Persistent() bool { return r.cfg.Persistent }

func (r *Redis) argv() []string {
	a := []string{}
	if r.cfg.Conf != "" {
		// redis-server accepts the configuration file only first.
		a = append(a, filepath.Join(r.cfg.Dir, confName))
	}
	if r.cfg.Sentinel {
		a = append(a, "--sentinel")
	}
	a = append(a,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.cfg.Dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(r.cfg.Dir, logName),
	)
	if !r.cfg.Sentinel {
		// No snapshots, and no 5 s pause before a full sync: replicas
		// should be in sync as soon as possible.
		a = append(a, "--save", "", "--repl-diskless-sync-delay", "0")
		if r.cfg.Persistent {
			a = append(a, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			a = append(a, "--appendonly", "no")
		}
	}
	if r.cfg.Cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(r.busPort),
		)
	}
	return append(a, r.cfg.Args...)
}

// launch starts a process and waits until it answers PING. On failure the
// process is gone and the error carries the log tail.
func (r *Redis) launch(ctx context.Context) error {
	if r.cfg.Conf != "" {
		// Rewritten on every start: a sentinel that failed to start may
		// have recorded a port it could not bind.
		if err := os.WriteFile(filepath.Join(r.cfg.Dir, confName), []byte(r.cfg.Conf), 0o600); err != nil {
			return err
		}
	}
	stdio, err := os.OpenFile(filepath.Join(r.cfg.Dir, stdioName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	logStart := map[string]int64{}
	for _, name := range []string{stdioName, logName} {
		if fi, err := os.Stat(filepath.Join(r.cfg.Dir, name)); err == nil {
			logStart[name] = fi.Size()
		}
	}
	cmd := exec.Command(r.cfg.Bin, r.argv()...)
	cmd.Stdout, cmd.Stderr = stdio, stdio
	p, err := Start(cmd)
	stdio.Close() // the child has its own descriptor
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc, r.logStart = p, logStart
	r.mu.Unlock()

	deadline := time.Now().Add(readyTimeout)
	for {
		// PING decides, not a dial: a server loading its append-only file
		// accepts connections but answers -LOADING. The process id tells
		// our server from another that took the port between our picking
		// it and our server binding it: ours then exits with "address
		// already in use", handled below.
		rs, err := Do(r.Addr(), 500*time.Millisecond, []string{"PING"}, []string{"INFO", "server"})
		if err == nil && rs[0] == "PONG" && infoField(rs[1], "process_id") == strconv.Itoa(p.Pid()) {
			return nil
		}
		if p.Exited() {
			tail := r.LogTail()
			if strings.Contains(tail, "already in use") {
				return fmt.Errorf("%w: port %d", errAddrInUse, r.port)
			}
			return fmt.Errorf("launch: redis-server exited before answering PING on %s; log tail:\n%s", r.Addr(), tail)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			p.Kill(exitTimeout)
			cause := ctx.Err()
			if cause == nil {
				cause = fmt.Errorf("no answer to PING within %v (last: %v)", readyTimeout, err)
			}
			return fmt.Errorf("launch: redis-server on %s: %w; log tail:\n%s", r.Addr(), cause, r.LogTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LogTail returns the last lines the current process wrote to its log and
// to stdout and stderr, where configuration errors go, for error messages.
func (r *Redis) LogTail() string {
	r.mu.Lock()
	start := r.logStart
	r.mu.Unlock()
	var b strings.Builder
	for _, name := range []string{stdioName, logName} {
		data, err := os.ReadFile(filepath.Join(r.cfg.Dir, name))
		if s := start[name]; s <= int64(len(data)) {
			data = data[s:]
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

func (r *Redis) current() *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Pause freezes the server with SIGSTOP: connections stay open and new
// ones are still accepted by the kernel, but nothing is answered until
// Resume. To a client this looks like a hung server or a lost network.
func (r *Redis) Pause() error { return r.current().Pause() }

// Resume undoes Pause.
func (r *Redis) Resume() error { return r.current().Resume() }

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Writes not yet on disk are lost. Killing a server that is not
// running does nothing.
func (r *Redis) Kill() error {
	if !r.current().Kill(exitTimeout) {
		return fmt.Errorf("launch: redis-server on %s did not exit within %v of SIGKILL", r.Addr(), exitTimeout)
	}
	return nil
}

// Stop shuts the server down with SIGTERM (a paused one is resumed first)
// and waits for it to exit, killing it if that takes more than about 10 s.
func (r *Redis) Stop() error {
	if !r.current().Stop(exitTimeout) {
		return fmt.Errorf("launch: redis-server on %s did not exit", r.Addr())
	}
	return nil
}

// Running reports whether the current process has not exited.
func (r *Redis) Running() bool { return !r.current().Exited() }

// Restart starts the server again on the same port, in the same directory,
// with the same arguments, stopping it first if it still runs, and waits
// until it answers PING. Data survives only with RedisConfig.Persistent (or
// in a cluster node's nodes.conf). Roles changed at run time, such as a
// replica promoted by a failover, are not remembered: the command line
// wins.
func (r *Redis) Restart(ctx context.Context) error {
	if err := r.Stop(); err != nil {
		return err
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = r.launch(ctx); !errors.Is(err, errAddrInUse) {
			return err
		}
		// The port is fixed: wait for whatever took it (typically a
		// short-lived outgoing connection) to let go.
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// Do sends one command to the server and returns its reply as [Do] does,
// with a deadline of timeout.
func (r *Redis) Do(timeout time.Duration, args ...string) (string, error) {
	rs, err := Do(r.Addr(), timeout, args)
	if rs == nil {
		return "", err
	}
	return rs[0], err
}

// Close stops the server and removes its directory if StartRedis made it.
func (r *Redis) Close() error {
	err := r.Stop()
	r.removeDir()
	return err
}

func (r *Redis) removeDir() {
	if r.tempDir {
		os.RemoveAll(r.cfg.Dir)
	}
}

// RedisVersion returns the output of `bin --version`, trimmed, or a note
// saying why there is none.
func RedisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
