package zklock_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// sessionTimeout is the tests' session timeout: short enough for the
// expiry tests, long enough for an election on a busy machine.
const sessionTimeout = 6 * time.Second

// dial connects to addrs (through dialer, if one is given) and waits for
// a session; the connection is closed when the test ends.
func dial(t testing.TB, addrs []string, timeout time.Duration, dialer ...zk.Dialer) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(quiet{}), zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
		if len(dialer) > 0 {
			return dialer[0](network, address, timeout)
		}
		return net.DialTimeout(network, address, timeout)
	}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatalf("no ZooKeeper session with %v within 30s", addrs)
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// newBackend returns a backend on its own session with addrs.
func newBackend(t testing.TB, addrs []string, timeout time.Duration) *zklock.Backend {
	t.Helper()
	b := zklock.New(dial(t, addrs, timeout), timeout)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// keyPath is where key's holders and waiters queue.
func keyPath(key string) string { return zklock.LinePath(zklock.DefaultRoot, key) }

// harness runs the conformance suite on the servers at addrs; Expire
// deletes the key's holders and waiters with a connection of its own.
func harness(t *testing.T, addrs []string) distlocktest.Harness {
	admin := dial(t, addrs, sessionTimeout)
	return distlocktest.Harness{
		NewBackend: func(t testing.TB) driver.Backend { return newBackend(t, addrs, sessionTimeout) },
		Expire: func(t testing.TB, key string) {
			_, _ = admin.Sync(keyPath(key)) // its server may lag behind the leader
			kids, _, err := admin.Children(keyPath(key))
			if err == zk.ErrNoNode {
				return
			}
			if err != nil {
				t.Fatalf("listing %s: %v", key, err)
			}
			for _, k := range kids {
				if err := admin.Delete(keyPath(key)+"/"+k, -1); err != nil && err != zk.ErrNoNode {
					t.Fatalf("deleting %s: %v", k, err)
				}
			}
		},
		TTL:     2 * time.Second,
		Stored:  func(t testing.TB, prefix string) []string { return stored(t, admin, prefix) },
		Reclaim: 30 * time.Second,
	}
}

// stored lists the znodes under the default root of the keys that begin
// with prefix: their nodes and everything below them.
func stored(t testing.TB, admin *zk.Conn, prefix string) []string {
	t.Helper()
	var found []string
	var walk func(p string)
	walk = func(p string) {
		names, _, err := admin.Children(p)
		if err == zk.ErrNoNode {
			return
		}
		if err != nil {
			t.Fatalf("listing %s: %v", p, err)
		}
		for _, n := range names {
			if p == zklock.DefaultRoot && !strings.HasPrefix(n, zklock.EscapeKey(prefix)) {
				continue
			}
			found = append(found, p+"/"+n)
			walk(p + "/" + n)
		}
	}
	_, _ = admin.Sync(zklock.DefaultRoot)
	walk(zklock.DefaultRoot)
	return found
}

// TestStandalone runs the conformance suite, then the regression tests
// that need no faults of an ensemble, on one standalone server.
func TestStandalone(t *testing.T) {
	t.Parallel()
	srv := testserver.StartZooKeeper(t)
	addrs := []string{srv.Addr()}
	t.Run("Conformance", func(t *testing.T) { distlocktest.Run(t, harness(t, addrs)) })
	t.Run("SemaphoreWaitersIdle", func(t *testing.T) { testSemaphoreWaitersIdle(t, addrs) })
	t.Run("ReadWaitersIdle", func(t *testing.T) { testReadWaitersIdle(t, addrs) })
	t.Run("MutexWaitersNotStarved", func(t *testing.T) { testMutexWaitersNotStarved(t, addrs) })
	t.Run("MutexWaitersIdle", func(t *testing.T) { testMutexWaitersIdle(t, addrs) })
	t.Run("LapsedPermitInLine", func(t *testing.T) { testLapsedPermitInLine(t, addrs) })
	t.Run("EmptyKey", func(t *testing.T) { testEmptyKey(t, addrs) })
	t.Run("WatchAfterTargetLeft", func(t *testing.T) { testWatchAfterTargetLeft(t, addrs) })
	t.Run("LocateSyncs", func(t *testing.T) { testLocateSyncs(t, addrs) })
	t.Run("LostReleaseReply", func(t *testing.T) { testLostReleaseReply(t, addrs) })
	t.Run("ReentrantOutlivesSession", func(t *testing.T) { testReentrantOutlivesSession(t, addrs) })
	t.Run("ReentrantLostJoinReply", func(t *testing.T) { testReentrantLostJoinReply(t, addrs) })
	t.Run("KindMismatch", func(t *testing.T) { testKindMismatch(t, addrs) })
	t.Run("KindRace", func(t *testing.T) { testKindRace(t, addrs) })
	t.Run("StateReclaimed", func(t *testing.T) { testStateReclaimed(t, addrs) })
	t.Run("KeyBytes", func(t *testing.T) { testKeyBytes(t, addrs) })
	t.Run("ReentrantFair", func(t *testing.T) { testReentrantFair(t, addrs) })
	t.Run("RoundTrips", func(t *testing.T) { testRoundTrips(t, addrs) })
	t.Run("HandoffRoundTrips", func(t *testing.T) { testHandoffRoundTrips(t, addrs) })
	t.Run("NoLostWakeUp", func(t *testing.T) { testNoLostWakeUp(t, addrs) })
	t.Run("WaiterRequests", func(t *testing.T) { testWaiterRequests(t, addrs) })
	t.Run("PlainWatchSetOnce", func(t *testing.T) { testPlainWatchSetOnce(t, addrs) })
	t.Run("FarWaiterKeepsPlace", func(t *testing.T) { testFarWaiterKeepsPlace(t, addrs) })
	t.Run("PlainGiveUpLeavesLine", func(t *testing.T) { testPlainGiveUpLeavesLine(t, addrs) })
}
