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

// ErrNoZooKeeper is returned by [StartZooKeeper] and [StartEnsemble] when
// java or the ZooKeeper jars are missing.
var ErrNoZooKeeper = errors.New("launch: ZooKeeper needs java and the jars of Debian's zookeeper package: " +
	"install them with scripts/install-deps.sh test (or apt-get install zookeeper default-jre-headless)")

// zkJars are the jars a ZooKeeper server needs, from Debian's zookeeper
// package and its dependencies (found in ZooKeeperJarDir).
var zkJars = []string{
	"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar",
	"netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar",
	"netty-codec.jar", "netty-resolver.jar", "netty-transport-native-epoll.jar",
	"netty-transport-native-unix-common.jar", "commons-cli.jar", "metrics-core.jar", "snappy-java.jar",
}

// ZooKeeperJarDir is where the server's jars are: $DISTLOCK_ZOOKEEPER_JARS,
// or Debian's /usr/share/java.
func ZooKeeperJarDir() string {
	if d := os.Getenv("DISTLOCK_ZOOKEEPER_JARS"); d != "" {
		return d
	}
	return "/usr/share/java"
}

// ZooKeeperConfig describes the ZooKeeper servers to start. The zero value
// is a server with a 200 ms tick, sessions of up to 60 s and container
// nodes checked every 2 s.
type ZooKeeperConfig struct {
	// Tick is the server's tickTime (default 200 ms): short, so that
	// elections and session expiry take seconds, not tens of seconds.
	// Sessions last at least two ticks.
	Tick time.Duration
	// MaxSessionTimeout is the longest session the server grants (default
	// 60 s); a client that asks for more gets this.
	MaxSessionTimeout time.Duration
	// ContainerCheck is how often the leader deletes the container nodes
	// left empty (the system property znode.container.checkIntervalMs;
	// default 2 s here, a minute in ZooKeeper's own default), so that a
	// test sees a key's nodes reclaimed within seconds.
	ContainerCheck time.Duration
}

func (c ZooKeeperConfig) withDefaults() ZooKeeperConfig {
	if c.Tick <= 0 {
		c.Tick = 200 * time.Millisecond
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = time.Minute
	}
	if c.ContainerCheck <= 0 {
		c.ContainerCheck = DefaultContainerCheck
	}
	return c
}

// DefaultContainerCheck is ZooKeeperConfig.ContainerCheck's default.
const DefaultContainerCheck = 2 * time.Second

// ZooKeeper is one ZooKeeper server, run with java from the jars of
// Debian's zookeeper package (3.8), on a fixed port of 127.0.0.1 in a
// temporary directory: standalone ([StartZooKeeper]) or a member of an
// ensemble ([StartEnsemble]). Its admin server is off and the four-letter
// words srvr, ruok and mntr are on. Its methods are safe for concurrent
// use; they act on the current process, which Restart replaces.
type ZooKeeper struct {
	port int
	dir  string
	argv []string

	mu   sync.Mutex
	proc *Proc
}

// zkArgv returns the java command line for a server of cfg with config
// file conf.
func zkArgv(cfg ZooKeeperConfig, conf string) ([]string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w (java: %v)", ErrNoZooKeeper, err)
	}
	cp := make([]string, len(zkJars))
	for i, j := range zkJars {
		cp[i] = filepath.Join(ZooKeeperJarDir(), j)
		if _, err := os.Stat(cp[i]); err != nil {
			return nil, fmt.Errorf("%w (%v)", ErrNoZooKeeper, err)
		}
	}
	return []string{java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dzookeeper.admin.enableServer=false", "-Dzookeeper.cnxTimeout=1000",
		"-Dznode.container.checkIntervalMs=" + strconv.FormatInt(cfg.ContainerCheck.Milliseconds(), 10),
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", strings.Join(cp, ":"), "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf}, nil
}

// zkConfig writes dir/zoo.cfg for a server on clientPort; peers, for an
// ensemble member, are its server.N lines and id its myid.
func zkConfig(cfg ZooKeeperConfig, dir string, clientPort int, id int, peers []string) (string, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", err
	}
	text := fmt.Sprintf(`tickTime=%d
initLimit=20
syncLimit=5
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
maxClientCnxns=0
forceSync=no
`, cfg.Tick.Milliseconds(), 2*cfg.Tick.Milliseconds(), cfg.MaxSessionTimeout.Milliseconds(), data, clientPort)
	if len(peers) > 0 {
		text += strings.Join(peers, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(id)), 0o644); err != nil {
			return "", err
		}
	}
	conf := filepath.Join(dir, "zoo.cfg")
	return conf, os.WriteFile(conf, []byte(text), 0o644)
}

// StartZooKeeper starts a standalone server on a free port of 127.0.0.1 in
// a temporary directory and returns once it serves clients. The caller must
// Close it.
func StartZooKeeper(ctx context.Context, cfg ZooKeeperConfig) (*ZooKeeper, error) {
	zs, err := startZooKeepers(ctx, cfg, 1)
	if err != nil {
		return nil, err
	}
	return zs[0], nil
}

// StartEnsemble starts an ensemble of n servers at once and returns once
// every one of them serves clients (a leader was elected and the others
// follow it). The caller must Close each.
func StartEnsemble(ctx context.Context, cfg ZooKeeperConfig, n int) ([]*ZooKeeper, error) {
	if n < 2 {
		return nil, fmt.Errorf("launch: an ensemble of %d servers; use StartZooKeeper for one", n)
	}
	return startZooKeepers(ctx, cfg, n)
}

// startZooKeepers starts n servers, on other ports if a port picked free
// was taken before a server could bind it (other processes pick free ports
// too).
func startZooKeepers(ctx context.Context, cfg ZooKeeperConfig, n int) ([]*ZooKeeper, error) {
	for attempt := 1; ; attempt++ {
		zs, err := startZooKeepersOnce(ctx, cfg, n)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			return zs, err
		}
	}
}

func startZooKeepersOnce(ctx context.Context, cfg ZooKeeperConfig, n int) (zs []*ZooKeeper, err error) {
	cfg = cfg.withDefaults()
	ports, err := FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var peers []string
	if n > 1 {
		for i := range n {
			peers = append(peers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
		}
	}
	defer func() {
		if err != nil {
			for _, z := range zs {
				_ = z.Close()
			}
			zs = nil
		}
	}()
	for i := range n {
		dir, err := os.MkdirTemp("", "distlock-zk-")
		if err != nil {
			return zs, err
		}
		z := &ZooKeeper{port: ports[3*i], dir: dir}
		zs = append(zs, z)
		conf, err := zkConfig(cfg, dir, z.port, i+1, peers)
		if err != nil {
			return zs, err
		}
		if z.argv, err = zkArgv(cfg, conf); err != nil {
			return zs, err
		}
		if err := z.launch(); err != nil {
			return zs, err
		}
	}
	for _, z := range zs {
		if err := z.AwaitServing(ctx, ""); err != nil {
			return zs, err
		}
	}
	return zs, nil
}

// Addr returns the server's client address, "127.0.0.1:port". It stays
// the same across Restart.
func (z *ZooKeeper) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.port)) }

// Mode asks the server (four-letter word srvr) whether it is the
// "leader", a "follower" or "standalone".
func (z *ZooKeeper) Mode() (string, error) {
	out, err := FourLetter(z.Addr(), "srvr")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(l, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("not serving: %q", strings.TrimSpace(out))
}

// FourLetter sends a four-letter word to the ZooKeeper server at addr and
// returns its answer.
func FourLetter(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String(), nil
}

// launch starts a process; it does not wait for it to serve.
func (z *ZooKeeper) launch() error {
	log, err := os.OpenFile(filepath.Join(z.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(z.argv[0], z.argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := Start(cmd)
	if err != nil {
		return fmt.Errorf("launch: starting ZooKeeper: %w", err)
	}
	z.mu.Lock()
	z.proc = p
	z.mu.Unlock()
	return nil
}

// AwaitServing waits until the server answers srvr with a mode (with
// mode, if it is not empty), for up to a minute: JVMs start slowly on a
// busy machine.
func (z *ZooKeeper) AwaitServing(ctx context.Context, mode string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := z.Mode()
		if err == nil && mode != "" && m != mode {
			err = fmt.Errorf("mode %s, want %s", m, mode)
		}
		if err == nil {
			return nil
		}
		if z.current().Exited() {
			tail := z.LogTail()
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("launch: ZooKeeper on %s: %w; log tail:\n%s", z.Addr(), errAddrInUse, tail)
			}
			return fmt.Errorf("launch: ZooKeeper on %s exited; log tail:\n%s", z.Addr(), tail)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("launch: ZooKeeper on %s not serving: %v; log tail:\n%s", z.Addr(), errors.Join(ctx.Err(), err), z.LogTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogTail returns the end of the server's log, for error messages.
func (z *ZooKeeper) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(z.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (z *ZooKeeper) current() *Proc {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.proc
}

// Pause freezes the server with SIGSTOP: its connections stay open and
// unanswered, and its peers see it vanish.
func (z *ZooKeeper) Pause() error { return z.current().Pause() }

// Resume undoes Pause.
func (z *ZooKeeper) Resume() error { return z.current().Resume() }

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Its data directory stays, for Restart.
func (z *ZooKeeper) Kill() error {
	if !z.current().Kill(exitTimeout) {
		return fmt.Errorf("launch: ZooKeeper on %s did not exit within %v of SIGKILL", z.Addr(), exitTimeout)
	}
	return nil
}

// Restart kills the server if it runs, starts it again with the same
// configuration and data, and waits until it serves clients.
func (z *ZooKeeper) Restart(ctx context.Context) error {
	if err := z.Kill(); err != nil {
		return err
	}
	if err := z.launch(); err != nil {
		return err
	}
	return z.AwaitServing(ctx, "")
}

// Close kills the server and removes its directory.
func (z *ZooKeeper) Close() error {
	var err error
	if p := z.current(); p != nil {
		err = z.Kill()
	}
	_ = os.RemoveAll(z.dir)
	return err
}
