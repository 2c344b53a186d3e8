package testserver

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock-go/distlock/internal/launch"
)

// StartEtcd starts an etcd cluster of n members (see launch.StartEtcd)
// that is killed when the test ends, and returns its client addresses.
// Without a server program (none in $DISTLOCK_ETCD, and none could be
// built) the test is skipped, or failed under DISTLOCK_REQUIRE_SERVERS=1.
func StartEtcd(tb testing.TB, n int) []string {
	tb.Helper()
	ms, err := launch.StartEtcd(context.Background(), n)
	if errors.Is(err, launch.ErrNoEtcd) {
		unavailable(tb, "%v", err)
	}
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	addrs := make([]string, len(ms))
	for i, m := range ms {
		addrs[i] = m.Addr()
		tb.Cleanup(func() { _ = m.Close() })
	}
	return addrs
}
