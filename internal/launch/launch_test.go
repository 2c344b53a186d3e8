package launch_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// startRedis starts a server for t, skipped (or failed under
// DISTLOCK_REQUIRE_SERVERS=1) when redis-server is missing.
func startRedis(t *testing.T, cfg launch.RedisConfig) *launch.Redis {
	t.Helper()
	r, err := launch.StartRedis(context.Background(), cfg)
	if errors.Is(err, launch.ErrNoRedisServer) {
		if os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func do(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	rs, err := launch.Do(addr, 2*time.Second, args)
	if rs == nil {
		return "", err
	}
	return rs[0], err
}

func TestRedisRestartKeepsDataOnlyWithPersistence(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		r := startRedis(t, launch.RedisConfig{Persistent: persistent})
		if _, err := r.Do(time.Second, "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		if err := r.Kill(); err != nil {
			t.Fatal(err)
		}
		if r.Running() {
			t.Fatal("server still running after Kill")
		}
		if _, err := r.Do(time.Second, "PING"); err == nil {
			t.Fatal("a killed server answered PING")
		}
		addr := r.Addr()
		if err := r.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r.Addr() != addr {
			t.Fatalf("address changed across Restart: %s, then %s", addr, r.Addr())
		}
		got, err := r.Do(time.Second, "GET", "k")
		switch {
		case persistent && (err != nil || got != "v"):
			t.Errorf("persistent server lost its key across kill and restart: %q, %v", got, err)
		case !persistent && !errors.Is(err, launch.ErrNil):
			t.Errorf("server without persistence kept its key: %q, %v", got, err)
		}
	}
}

func TestRedisPauseResume(t *testing.T) {
	r := startRedis(t, launch.RedisConfig{})
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := launch.Do(r.Addr(), 200*time.Millisecond, []string{"PING"}); err == nil {
		t.Fatal("a paused server answered PING")
	}
	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Do(2*time.Second, "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Resume: %q, %v", got, err)
	}
	// Stop resumes a paused server so that SIGTERM can act.
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRedisBadArgsReportLog(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip(err)
	}
	_, err := launch.StartRedis(context.Background(), launch.RedisConfig{Args: []string{"--no-such-option", "x"}})
	if err == nil {
		t.Fatal("StartRedis accepted an unknown option")
	}
	t.Logf("error, as expected: %v", err)
}

func TestProxyFaults(t *testing.T) {
	r := startRedis(t, launch.RedisConfig{})
	p, err := launch.StartProxy(r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := do(t, p.Addr(), "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING through the proxy: %q, %v", got, err)
	}

	// A connection open across Cut is reset, and new ones are refused.
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p.Cut()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("read on a cut connection succeeded")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("a cut connection timed out instead of failing at once")
	}
	if _, err := do(t, p.Addr(), "PING"); err == nil {
		t.Error("PING through a cut proxy succeeded")
	}
	p.Restore()
	if got, err := do(t, p.Addr(), "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Restore: %q, %v", got, err)
	}

	// Blackhole: silence, then the held request is answered on Restore.
	conn2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	p.Blackhole()
	if _, err := conn2.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 7)
	if _, err := conn2.Read(buf); err == nil {
		t.Fatal("a blackholed connection answered")
	}
	p.Restore()
	_ = conn2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := conn2.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("held request after Restore: %q, %v", buf[:n], err)
	}

	// HoldRequest: the matching request waits, and reaches the server on
	// deliver even though its client has given up and closed meanwhile.
	held, deliver := p.HoldRequest("held-key")
	conn3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn3.Write([]byte("SET held-key v\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not held")
	}
	if got, err := do(t, r.Addr(), "EXISTS", "held-key"); err != nil || got != "0" {
		t.Fatalf("EXISTS while the SET is held: %q, %v; want 0", got, err)
	}
	conn3.Close()
	deliver()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := do(t, r.Addr(), "EXISTS", "held-key")
		if err == nil && got == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EXISTS after deliver: %q, %v; want 1", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcSignals(t *testing.T) {
	p, err := launch.Start(exec.Command("sleep", "30"))
	if err != nil {
		t.Skip(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if !p.Kill(5 * time.Second) {
		t.Fatal("process not gone after Kill")
	}
	if !p.Exited() || p.ExitCode() != -1 {
		t.Fatalf("after Kill: exited %v, code %d", p.Exited(), p.ExitCode())
	}
	if err := p.Pause(); !errors.Is(err, launch.ErrExited) {
		t.Fatalf("Pause of an exited process: %v, want ErrExited", err)
	}
}
