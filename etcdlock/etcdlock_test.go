package etcdlock_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance(t, etcdtest.Start(t), time.Second)
}

// TestConformanceCluster runs the suite on three members with leases of
// 2s: on a loaded machine, a renewal that needs a quorum of three
// starved processes can take most of a second.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	conformance(t, etcdtest.StartCluster(t, 3), 2*time.Second)
}

func conformance(t *testing.T, c *etcdtest.Cluster, ttl time.Duration) {
	admin := c.Client(t)
	distlocktest.Run(t, distlocktest.Harness{
		NewBackend: func(tb testing.TB) driver.Backend { return newBackend(tb, c) },
		Expire:     func(tb testing.TB, key string) { expire(tb, admin, key) },
		// etcd leases are whole seconds, and a write on a loaded
		// cluster can take a good part of 200ms.
		TTL:    ttl,
		Stored: func(tb testing.TB, prefix string) []string { return stored(tb, admin, prefix) },
	})
}

// stored lists the etcd keys that the backend (with the default prefix)
// keeps for the lock keys beginning with prefix: holdings and waiters,
// re-entrant holds, release receipts, and the token notes of earlier
// versions.
func stored(tb testing.TB, cli *clientv3.Client, prefix string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	for _, root := range []string{"lock/", "hold/", "released/", "token/"} {
		resp, err := cli.Get(ctx, etcdlock.DefaultPrefix+root+url.PathEscape(prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			tb.Fatalf("stored %q: %v", prefix, err)
		}
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys
}

// newBackend returns a backend on a client of its own, closed at cleanup.
func newBackend(tb testing.TB, c *etcdtest.Cluster, opts ...etcdlock.Option) *etcdlock.Backend {
	b := etcdlock.New(c.Client(tb), opts...)
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// expire deletes every holding of key behind its holders' backs, and
// the holds of a re-entrant lease.
func expire(tb testing.TB, cli *clientv3.Client, key string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cli.Txn(ctx).Then(
		clientv3.OpDelete(lockPrefix(key), clientv3.WithPrefix()),
		clientv3.OpDelete(holdPrefix(key), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		tb.Fatalf("expire %q: %v", key, err)
	}
}
