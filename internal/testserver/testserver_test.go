package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func mustDo(t *testing.T, r *Redis, want string, args ...string) {
	t.Helper()
	got, err := r.Do(t, args...)
	if err != nil || got != want {
		t.Fatalf("%s: got %q, %v; want %q", strings.Join(args, " "), got, err, want)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRedisReplies(t *testing.T) {
	t.Parallel()
	r := StartRedis(t)
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") || r.Port() == 0 {
		t.Fatalf("Addr %q, Port %d", r.Addr(), r.Port())
	}
	mustDo(t, r, "PONG", "PING")
	mustDo(t, r, "OK", "SET", "k", "v\r\nwith CRLF")
	mustDo(t, r, "v\r\nwith CRLF", "GET", "k")
	mustDo(t, r, "OK", "SET", "empty", "")
	mustDo(t, r, "", "GET", "empty")
	mustDo(t, r, "5", "INCRBY", "n", "5")
	mustDo(t, r, "2", "RPUSH", "list", "a", "b")
	mustDo(t, r, "a\nb", "LRANGE", "list", "0", "-1")
	mustDo(t, r, "", "LRANGE", "list", "5", "6")

	if _, err := r.Do(t, "GET", "missing"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET missing: err %v, want ErrNil", err)
	}
	_, err := r.Do(t, "NOSUCHCOMMAND")
	var re ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(string(re), "ERR ") {
		t.Fatalf("unknown command: err %v (%T), want a ReplyError", err, err)
	}
	// A nested array holding an integer, a nil and an error.
	got, err := Do(r.Addr(), 5*time.Second, "EVAL",
		"return {1, false, redis.error_reply('MYERR boom'), {'x', 'y'}}", "0")
	if err != nil || got != "1\n\nMYERR boom\nx\ny" {
		t.Fatalf("EVAL: got %q, %v", got, err)
	}
}

func TestRedisWithArgs(t *testing.T) {
	t.Parallel()
	r := StartRedis(t, WithArgs("--maxmemory", "12345678"))
	mustDo(t, r, "maxmemory\n12345678", "CONFIG", "GET", "maxmemory")
	mustDo(t, r, "appendonly\nno", "CONFIG", "GET", "appendonly")
	mustDo(t, r, "save\n", "CONFIG", "GET", "save")
}

func TestRedisLifecycle(t *testing.T) {
	t.Parallel()
	r := StartRedis(t)
	mustDo(t, r, "OK", "SET", "k", "v")

	r.Pause(t)
	start := time.Now()
	if _, err := Do(r.Addr(), 300*time.Millisecond, "GET", "k"); !isTimeout(err) {
		t.Fatalf("Do on a paused server: err %v, want a timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	r.Resume(t)
	mustDo(t, r, "v", "GET", "k")

	r.Kill(t)
	if _, err := r.Do(t, "PING"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Do on a killed server: err %v, want connection refused", err)
	}
	// None of these may panic or hang on a dead process.
	r.Kill(t)
	r.Pause(t)
	r.Resume(t)
	r.Stop(t)

	r.Restart(t)
	if _, err := r.Do(t, "GET", "k"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET after restart without persistence: err %v, want ErrNil", err)
	}

	// Restart of a running server stops it first.
	mustDo(t, r, "OK", "SET", "k", "v2")
	r.Restart(t)
	if _, err := r.Do(t, "GET", "k"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET after restart of a running server: err %v, want ErrNil", err)
	}

	// Left paused on purpose: cleanup must still get rid of it.
	r.Pause(t)
}

func TestRedisPersistence(t *testing.T) {
	t.Parallel()
	r := StartRedis(t, WithPersistence())
	mustDo(t, r, "OK", "SET", "k", "v")

	// SIGKILL gives the server no chance to flush: only appendfsync always
	// can keep the write.
	r.Kill(t)
	r.Restart(t)
	mustDo(t, r, "v", "GET", "k")

	mustDo(t, r, "OK", "SET", "k2", "v2")
	r.Stop(t)
	r.Restart(t)
	mustDo(t, r, "v", "GET", "k")
	mustDo(t, r, "v2", "GET", "k2")
	if _, err := os.Stat(r.Dir() + "/appendonlydir"); err != nil {
		t.Fatalf("no append-only files in %s: %v", r.Dir(), err)
	}
}

// recordTB captures Skipf and Fatalf instead of acting on the real test.
type recordTB struct {
	testing.TB
	mu      sync.Mutex
	skipped string
	fatal   string
}

func (r *recordTB) Helper() {}

func (r *recordTB) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func requireOutcome(t *testing.T, require string) *recordTB {
	t.Setenv(RequireEnv, require)
	rec := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Require(rec, "distlock-no-such-binary")
		t.Error("Require returned for a missing binary")
	}()
	<-done
	return rec
}

func TestRequire(t *testing.T) {
	if p := Require(t, "redis-server"); p == "" {
		t.Fatal("Require returned an empty path")
	}
	if rec := requireOutcome(t, ""); rec.skipped == "" || rec.fatal != "" {
		t.Fatalf("missing binary without %s: skipped=%q fatal=%q", RequireEnv, rec.skipped, rec.fatal)
	} else if !strings.Contains(rec.skipped, "install-deps.sh") {
		t.Fatalf("skip message %q does not say how to install", rec.skipped)
	}
	if rec := requireOutcome(t, "1"); rec.fatal == "" || rec.skipped != "" {
		t.Fatalf("missing binary with %s=1: skipped=%q fatal=%q", RequireEnv, rec.skipped, rec.fatal)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	rec := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartRedis(rec, WithArgs("--no-such-directive", "1"))
		t.Error("StartRedis returned for a server that cannot start")
	}()
	<-done
	if !strings.Contains(rec.fatal, "no-such-directive") || !strings.Contains(rec.fatal, "stdio.log") {
		t.Fatalf("failure message lacks the server's complaint:\n%s", rec.fatal)
	}
}

func TestProxy(t *testing.T) {
	r := StartRedis(t)
	t.Run("faults", func(t *testing.T) { testProxyFaults(t, r) })

	// The subtest's cleanup closed the proxy; give exiting goroutines a
	// moment to disappear from the stack dump.
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "testserver.(*Proxy)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy goroutines left after cleanup:\n%s", stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testProxyFaults(t *testing.T, r *Redis) {
	p := StartProxy(t, r.Addr())
	ping := func(timeout time.Duration) error {
		got, err := Do(p.Addr(), timeout, "PING")
		if err == nil && got != "PONG" {
			t.Fatalf("PING via proxy: %q", got)
		}
		return err
	}
	if err := ping(time.Second); err != nil {
		t.Fatalf("PING via proxy: %v", err)
	}

	// A connection opened before a fault, as a pooled client would hold.
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	exchange := func(c net.Conn, br *bufio.Reader, timeout time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return "", err
		}
		return br.ReadString('\n')
	}
	c, br := dial()
	if got, err := exchange(c, br, time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("raw PING: %q, %v", got, err)
	}

	p.Cut()
	if _, err := exchange(c, br, time.Second); err == nil || isTimeout(err) {
		t.Fatalf("open connection after Cut: err %v, want a reset", err)
	}
	if err := ping(time.Second); err == nil || isTimeout(err) {
		t.Fatalf("new connection after Cut: err %v, want a reset", err)
	}
	p.Restore()
	if err := ping(time.Second); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}

	c, br = dial()
	if got, err := exchange(c, br, time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("raw PING: %q, %v", got, err)
	}
	p.Blackhole()
	if err := ping(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection while blackholed: err %v, want a timeout", err)
	}
	if _, err := exchange(c, br, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection while blackholed: err %v, want a timeout", err)
	}
	p.Restore()
	// The PING held during the blackhole is delivered now.
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := br.ReadString('\n'); err != nil || got != "+PONG\r\n" {
		t.Fatalf("held reply after Restore: %q, %v", got, err)
	}
	if err := ping(time.Second); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}

	// Cut also ends connections stuck in a blackhole.
	p.Blackhole()
	if _, err := exchange(c, br, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection while blackholed: err %v, want a timeout", err)
	}
	p.Cut()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("blackholed connection after Cut: err %v, want a reset", err)
	}
	p.Restore()

	// DropReply: the matching request is applied, its reply lost (EOF),
	// other requests and later connections are untouched.
	c, br = dial()
	dropped := p.DropReply("lost-reply")
	if got, err := exchange(c, br, time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("PING before the armed request: %q, %v", got, err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("SET dropped lost-reply\r\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := br.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("reply to the armed request: %q, %v; want EOF", got, err)
	}
	select {
	case <-dropped:
	default:
		t.Fatal("DropReply's channel not closed after the drop")
	}
	if got, err := Do(p.Addr(), time.Second, "GET", "dropped"); err != nil || got != "lost-reply" {
		t.Fatalf("GET after the dropped reply: %q, %v; want the request applied", got, err)
	}

	// A dead target shows through as an error, not a hang.
	dead := StartProxy(t, "127.0.0.1:1")
	if _, err := Do(dead.Addr(), 2*time.Second, "PING"); err == nil || isTimeout(err) {
		t.Fatalf("PING via proxy to a dead target: err %v", err)
	}
	// Left blackholed with a connection open on purpose: cleanup must
	// still release everything.
	c, br = dial()
	p.Blackhole()
	if _, err := exchange(c, br, 100*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection while blackholed: err %v, want a timeout", err)
	}
}

func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five servers and waits for sentinel discovery")
	}
	t.Parallel()
	s := StartSentinel(t)
	addrs := s.SentinelAddrs()
	if len(addrs) != 3 || len(s.Sentinels) != 3 || addrs[0] == addrs[1] || addrs[1] == addrs[2] {
		t.Fatalf("SentinelAddrs %v", addrs)
	}
	oldMaster, oldReplica := s.Master, s.Replica
	for _, a := range addrs {
		got, err := Do(a, time.Second, "SENTINEL", "get-master-addr-by-name", s.MasterName)
		if want := strings.Replace(oldMaster.Addr(), ":", "\n", 1); err != nil || got != want {
			t.Fatalf("sentinel %s: master %q, %v; want %q", a, got, err, want)
		}
	}
	mustDo(t, oldMaster, "OK", "SET", "k", "v")
	mustDo(t, oldMaster, "1", "WAIT", "1", "5000")
	mustDo(t, oldReplica, "v", "GET", "k")

	start := time.Now()
	s.Failover(t)
	t.Logf("failover took %v", time.Since(start))
	if s.Master != oldReplica || s.Replica != oldMaster {
		t.Fatal("Failover did not swap Master and Replica")
	}
	info, err := s.Master.Do(t, "INFO", "replication")
	if err != nil || infoField(info, "role") != "master" {
		t.Fatalf("new master INFO: %q, %v", info, err)
	}
	for _, a := range addrs {
		got, err := Do(a, time.Second, "SENTINEL", "get-master-addr-by-name", s.MasterName)
		if want := strings.Replace(s.Master.Addr(), ":", "\n", 1); err != nil || got != want {
			t.Fatalf("sentinel %s after failover: master %q, %v; want %q", a, got, err, want)
		}
	}
	mustDo(t, s.Master, "v", "GET", "k")
	mustDo(t, s.Master, "OK", "SET", "k", "after")

	// The sentinels demote the old master on their own schedule.
	start = time.Now()
	s.WaitSynced(t)
	t.Logf("old master demoted after %v", time.Since(start))
	mustDo(t, s.Master, "1", "WAIT", "1", "5000")
	mustDo(t, s.Replica, "after", "GET", "k")
	if _, err := s.Replica.Do(t, "SET", "k", "x"); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("SET on the demoted master: err %v, want READONLY", err)
	}

	// And back again: a second failover must not be refused.
	s.Failover(t)
	if s.Master != oldMaster {
		t.Fatal("second Failover did not promote the original master")
	}
	mustDo(t, s.Master, "OK", "SET", "k", "back")
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	t.Parallel()
	c := StartCluster(t, 3)
	if len(c.Nodes) != 3 || len(c.Addrs()) != 3 {
		t.Fatalf("%d nodes, addrs %v", len(c.Nodes), c.Addrs())
	}
	for _, n := range c.Nodes {
		info, err := n.Do(t, "CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{
			"cluster_state":          "ok",
			"cluster_known_nodes":    "3",
			"cluster_size":           "3",
			"cluster_slots_assigned": "16384",
		} {
			if got := infoField(info, k); got != want {
				t.Fatalf("%s: %s = %q, want %q", n.Addr(), k, got, want)
			}
		}
	}

	// Keys in different slots, so that redirections are exercised from
	// Nodes[0] to every other node.
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		got, err := c.Do(t, "SET", key, "v-"+key)
		if err != nil || got != "OK" {
			t.Fatalf("SET %s: %q, %v", key, got, err)
		}
		got, err = c.Do(t, "GET", key)
		if err != nil || got != "v-"+key {
			t.Fatalf("GET %s: %q, %v", key, got, err)
		}
		// Exactly one node owns the key; the others redirect.
		owners, moved := 0, 0
		for _, n := range c.Nodes {
			got, err := n.Do(t, "GET", key)
			var re ReplyError
			switch {
			case err == nil && got == "v-"+key:
				owners++
			case errors.As(err, &re) && strings.HasPrefix(string(re), "MOVED "):
				moved++
			default:
				t.Fatalf("GET %s on %s: %q, %v", key, n.Addr(), got, err)
			}
		}
		if owners != 1 || moved != 2 {
			t.Fatalf("key %s: %d owners, %d redirections", key, owners, moved)
		}
	}
}
