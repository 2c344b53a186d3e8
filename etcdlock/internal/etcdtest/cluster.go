// Package etcdtest runs etcd members for the tests of package etcdlock: a
// single member or a cluster, on free ports of 127.0.0.1, killed by
// tb.Cleanup hooks. A member can be paused (SIGSTOP), killed and
// restarted. The members are run by internal/launch (see
// launch.StartEtcd): the program in ../etcdserver/cmd, on etcd's embed
// package, a Go module of its own so that etcd's server stays out of the
// etcdlock module's requirements. When it cannot be built the tests are
// skipped, or failed if DISTLOCK_REQUIRE_SERVERS=1.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock-go/distlock/internal/launch"
	"github.com/distlock-go/distlock/internal/testserver"
)

// Cluster is a group of etcd members started together. Its methods may be
// called from any goroutine.
type Cluster struct {
	Members []*Member
}

// Member is one etcd server process.
type Member struct {
	tb  testing.TB
	srv *launch.Etcd
}

// Start starts a single member.
func Start(tb testing.TB) *Cluster { return StartCluster(tb, 1) }

// StartCluster starts n members that form one cluster, and waits until it
// serves clients.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	ms, err := launch.StartEtcd(context.Background(), n)
	if errors.Is(err, launch.ErrNoEtcd) {
		msg := fmt.Sprintf("etcd server unavailable: %v", err)
		if os.Getenv(testserver.RequireEnv) == "1" {
			tb.Fatalf("%s (%s=1)", msg, testserver.RequireEnv)
		}
		tb.Skipf("%s (set %s=1 to fail instead of skip)", msg, testserver.RequireEnv)
	}
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	c := &Cluster{}
	for _, m := range ms {
		c.Members = append(c.Members, &Member{tb: tb, srv: m})
		tb.Cleanup(func() { _ = m.Close() })
	}
	return c
}

// Endpoints returns the client addresses of the members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.Addr())
	}
	return eps
}

// Client returns a client of every member, closed at cleanup.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return Dial(tb, c.Endpoints()...)
}

// Dial returns a client of the endpoints, closed at cleanup.
func Dial(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcdtest: client of %v: %v", endpoints, err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader returns the member that leads the cluster, waiting up to 10s for
// an election.
func (c *Cluster) Leader(tb testing.TB) *Member {
	tb.Helper()
	cli := c.Client(tb)
	end := time.Now().Add(10 * time.Second)
	for {
		for _, m := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.Addr())
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return m
			}
		}
		if time.Now().After(end) {
			tb.Fatalf("etcdtest: no leader after 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr returns the member's client address, host:port.
func (m *Member) Addr() string { return m.srv.Addr() }

// Kill ends the member at once (SIGKILL), if it runs, and waits until it
// is gone. Its data stays for Restart.
func (m *Member) Kill() { m.check("kill", m.srv.Kill()) }

// Pause stops the member's process (SIGSTOP): it neither answers nor
// closes its connections, like a member that hangs.
func (m *Member) Pause() { m.check("pause", m.srv.Pause()) }

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() { m.check("resume", m.srv.Resume()) }

// Restart kills the member if it runs and starts it again on its data.
func (m *Member) Restart() {
	m.tb.Helper()
	if err := m.srv.Restart(context.Background()); err != nil {
		m.tb.Fatalf("etcdtest: %v", err)
	}
}

func (m *Member) check(what string, err error) {
	m.tb.Helper()
	if err != nil {
		m.tb.Errorf("etcdtest: %s: %v", what, err)
	}
}
