package launch_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// TestSentinelFailover: the deployment starts with Nodes[0] as master, a
// write replicates, and Failover promotes the replica, which then has the
// write and takes new ones.
func TestSentinelFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := startSentinel(ctx, t, launch.SentinelConfig{Persistent: true})
	if len(s.Nodes) != 2 || len(s.Sentinels) != 3 || len(s.Addrs()) != 5 {
		t.Fatalf("%d nodes, %d sentinels, %d addresses; want 2, 3, 5", len(s.Nodes), len(s.Sentinels), len(s.Addrs()))
	}
	if m := s.Master(); m != s.Nodes[0] {
		t.Fatalf("master %v, want %s", m, s.Nodes[0].Addr())
	}
	if _, err := s.Nodes[0].Do(time.Second, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Nodes[0].Do(2*time.Second, "WAIT", "1", "1000"); err != nil {
		t.Fatal(err)
	}
	addr, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if addr != s.Nodes[1].Addr() || s.Master() != s.Nodes[1] {
		t.Fatalf("new master %s (%v), want %s", addr, s.Master(), s.Nodes[1].Addr())
	}
	if got, err := s.Nodes[1].Do(time.Second, "GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET k on the new master: %q, %v; want v", got, err)
	}
	if _, err := s.Nodes[1].Do(time.Second, "SET", "k2", "v"); err != nil {
		t.Fatalf("the new master refuses a write: %v", err)
	}
}

// TestSentinelPauseMaster: a master paused past DownAfter is replaced, and
// resumed afterwards.
func TestSentinelPauseMaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := startSentinel(ctx, t, launch.SentinelConfig{})
	addr, err := s.PauseMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if addr != s.Nodes[1].Addr() {
		t.Fatalf("new master %s, want %s", addr, s.Nodes[1].Addr())
	}
	if _, err := s.Nodes[0].Do(time.Second, "PING"); err != nil {
		t.Fatalf("the old master was not resumed: %v", err)
	}
}

// startSentinel starts a deployment for t, skipped (or failed under
// DISTLOCK_REQUIRE_SERVERS=1) when redis-server is missing.
func startSentinel(ctx context.Context, t *testing.T, cfg launch.SentinelConfig) *launch.Sentinel {
	t.Helper()
	s, err := launch.StartSentinel(ctx, cfg)
	if errors.Is(err, launch.ErrNoRedisServer) {
		if os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSentinelQuickRejoin: QuickRejoin shortens the periods that bound how
// soon a replaced master follows the new one, on a Redis that can.
func TestSentinelQuickRejoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, quick := range []bool{false, true} {
		s := startSentinel(ctx, t, launch.SentinelConfig{QuickRejoin: quick})
		for _, sn := range s.Sentinels {
			got, err := sn.Do(time.Second, "SENTINEL", "DEBUG")
			if err != nil {
				t.Skipf("this Redis has no SENTINEL DEBUG (before 7.0): %v", err)
			}
			want := map[bool]string{false: "INFO-PERIOD\n10000\n", true: "INFO-PERIOD\n1000\n"}[quick]
			if !strings.Contains(got, want) || strings.Contains(got, "PUBLISH-PERIOD\n250\n") != quick {
				t.Errorf("QuickRejoin %v: sentinel %s reports\n%s", quick, sn.Addr(), got)
			}
		}
		_ = s.Close()
	}
}
