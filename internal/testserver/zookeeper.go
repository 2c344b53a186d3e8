package testserver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// zkMaxSession is the servers' default maxSessionTimeout.
const zkMaxSession = time.Minute

// ZooKeeperContainerCheck is how often the test servers delete the
// container nodes left empty.
const ZooKeeperContainerCheck = launch.DefaultContainerCheck

// ZooKeeper is one ZooKeeper server owned by a test, run by package launch
// with java from the jars of Debian's zookeeper package (3.8): standalone
// ([StartZooKeeper]) or a member of an [Ensemble]. Its tick is 200ms, so
// that elections and session expiry take seconds, and it deletes empty
// container nodes every [ZooKeeperContainerCheck].
type ZooKeeper struct {
	srv *launch.ZooKeeper
}

// StartZooKeeper starts a standalone server on a free port of 127.0.0.1
// in a temporary directory, and waits until it serves clients. It is
// killed when the test ends. Without java or the zookeeper package the
// test is skipped, or failed with DISTLOCK_REQUIRE_SERVERS=1.
func StartZooKeeper(tb testing.TB) *ZooKeeper {
	tb.Helper()
	return StartZooKeeperMaxSession(tb, zkMaxSession)
}

// StartZooKeeperMaxSession is [StartZooKeeper] for a server whose
// maxSessionTimeout is maxSession (at least 400ms, its minimum): it grants
// no session a longer timeout, whatever the client asks for.
func StartZooKeeperMaxSession(tb testing.TB, maxSession time.Duration) *ZooKeeper {
	tb.Helper()
	return startZooKeepers(tb, 1, maxSession)[0]
}

// Ensemble is a ZooKeeper ensemble of servers on 127.0.0.1, each in its
// own temporary directory, killed when the test ends.
type Ensemble struct {
	Nodes []*ZooKeeper
}

// StartEnsemble starts an ensemble of n servers at once and waits until
// every one of them serves clients (a leader was elected and the others
// follow it).
func StartEnsemble(tb testing.TB, n int) *Ensemble {
	tb.Helper()
	return &Ensemble{Nodes: startZooKeepers(tb, n, zkMaxSession)}
}

func startZooKeepers(tb testing.TB, n int, maxSession time.Duration) []*ZooKeeper {
	tb.Helper()
	cfg := launch.ZooKeeperConfig{MaxSessionTimeout: maxSession}
	var (
		srvs []*launch.ZooKeeper
		err  error
	)
	if n == 1 {
		var z *launch.ZooKeeper
		if z, err = launch.StartZooKeeper(context.Background(), cfg); err == nil {
			srvs = []*launch.ZooKeeper{z}
		}
	} else {
		srvs, err = launch.StartEnsemble(context.Background(), cfg, n)
	}
	if errors.Is(err, launch.ErrNoZooKeeper) {
		unavailable(tb, "%v", err)
	}
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	zs := make([]*ZooKeeper, len(srvs))
	for i, s := range srvs {
		zs[i] = &ZooKeeper{srv: s}
		tb.Cleanup(func() { _ = s.Close() })
	}
	return zs
}

// Addrs returns the client addresses of the members.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Nodes))
	for i, z := range e.Nodes {
		addrs[i] = z.Addr()
	}
	return addrs
}

// Leader returns the member that is the leader now, waiting up to 30s for
// one (after a failure, while the others elect it).
func (e *Ensemble) Leader(tb testing.TB) *ZooKeeper {
	tb.Helper()
	return e.member(tb, "leader")
}

// Follower returns a member that follows the leader now.
func (e *Ensemble) Follower(tb testing.TB) *ZooKeeper {
	tb.Helper()
	return e.member(tb, "follower")
}

func (e *Ensemble) member(tb testing.TB, mode string) *ZooKeeper {
	tb.Helper()
	var found *ZooKeeper
	waitFor(tb, 30*time.Second, "a ZooKeeper "+mode, func() error {
		for _, z := range e.Nodes {
			if m, _ := z.Mode(); m == mode {
				found = z
				return nil
			}
		}
		return fmt.Errorf("no member is the %s", mode)
	})
	return found
}

// AwaitServing waits until every member serves clients again.
func (e *Ensemble) AwaitServing(tb testing.TB) {
	tb.Helper()
	for _, z := range e.Nodes {
		if err := z.srv.AwaitServing(context.Background(), ""); err != nil {
			tb.Fatalf("testserver: %v", err)
		}
	}
}

// Addr returns the server's client address.
func (z *ZooKeeper) Addr() string { return z.srv.Addr() }

// Mode asks the server (four-letter word srvr) whether it is the
// "leader", a "follower" or "standalone".
func (z *ZooKeeper) Mode() (string, error) { return z.srv.Mode() }

// FourLetter sends a four-letter word to a ZooKeeper server at addr and
// returns its answer.
func FourLetter(addr, word string) (string, error) { return launch.FourLetter(addr, word) }

// Pause freezes the server with SIGSTOP: its connections stay open and
// unanswered, and its peers see it vanish.
func (z *ZooKeeper) Pause(tb testing.TB) {
	tb.Helper()
	if err := z.srv.Pause(); err != nil {
		tb.Fatalf("testserver: pausing ZooKeeper on %s: %v", z.Addr(), err)
	}
}

// Resume undoes Pause with SIGCONT.
func (z *ZooKeeper) Resume(tb testing.TB) {
	tb.Helper()
	if err := z.srv.Resume(); err != nil {
		tb.Fatalf("testserver: resuming ZooKeeper on %s: %v", z.Addr(), err)
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Its data directory stays, for Restart.
func (z *ZooKeeper) Kill(tb testing.TB) {
	tb.Helper()
	if err := z.srv.Kill(); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
}

// Restart kills the server if it runs, starts it again with the same
// configuration and data, and waits until it serves clients.
func (z *ZooKeeper) Restart(tb testing.TB) {
	tb.Helper()
	if err := z.srv.Restart(context.Background()); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
}
