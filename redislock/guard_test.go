package redislock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// declareFresh declares the server rdb reaches new, for a backend with
// opts, as an operator would after starting it; rdb is closed at cleanup.
func declareFresh(t testing.TB, rdb redis.UniversalClient, opts ...redislock.Option) {
	t.Helper()
	t.Cleanup(func() { rdb.Close() })
	b := newBackend(t, rdb, opts...)
	if err := b.DeclareFresh(context.Background()); err != nil {
		t.Fatalf("DeclareFresh: %v", err)
	}
}

// startCluster starts a three-master cluster and declares it new.
func startCluster(t testing.TB) *testserver.Cluster {
	t.Helper()
	cl := testserver.StartCluster(t, 3)
	declareFresh(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true}))
	return cl
}

// warnings joins the warnings of info, one per line.
func warnings(info driver.Info) string { return strings.Join(info.Warnings, "\n") }
