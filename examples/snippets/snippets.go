// Package snippets holds the short examples of the README and docs/ that
// are not whole programs, so that the compiler checks them
// (examples/readme_test.go checks that those pages show them unchanged).
package snippets

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"time"

	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/memlock"
	distlockotel "github.com/distlock-go/distlock/otel"
	"github.com/distlock-go/distlock/redislock"
	"github.com/distlock-go/distlock/redlock"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/zklock"
)

// alert stands for the user's paging hook.
func alert(key string, cause distlock.LossCause) { log.Printf("lease on %q lost: %v", key, cause) }

// Observe shows an observer of lost leases.
func Observe(backend driver.Backend) *distlock.Client {
	// readme-begin
	obs := distlock.ObserverFunc(func(ctx context.Context, e distlock.Event) {
		if e.Type == distlock.EventLost {
			alert(e.Key, e.Cause)
		}
	})
	c := distlock.New(backend, distlock.WithObserver(obs))
	// readme-end
	return c
}

// Telemetry shows the OpenTelemetry observer.
func Telemetry(backend driver.Backend) (*distlock.Client, error) {
	// readme-begin
	obs, err := distlockotel.NewObserver() // global providers; or WithMeterProvider, WithTracerProvider
	c := distlock.New(backend, distlock.WithObserver(obs))
	// readme-end
	return c, err
}

// SQL shows a client on PostgreSQL.
func SQL() (*distlock.Client, error) {
	// readme-begin
	db, _ := sql.Open("pgx", "postgres://app@db/app") // or "mysql", "sqlite"
	b, err := sqllock.New(db)                         // dialect from the driver; table created on first use
	c := distlock.New(b)
	// readme-end
	return c, err
}

// Etcd shows a client on an etcd cluster.
func Etcd() (*distlock.Client, error) {
	// readme-begin
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"}})
	c := distlock.New(etcdlock.New(cli), distlock.WithTTL(10*time.Second))
	// readme-end
	return c, err
}

// ZooKeeper shows a client on a ZooKeeper ensemble.
func ZooKeeper() (*distlock.Client, error) {
	// readme-begin
	conn, _, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second)
	c := distlock.New(zklock.New(conn, 10*time.Second)) // the session timeout conn was opened with
	// readme-end
	return c, err
}

// Redis shows a client on one Redis server.
func Redis() *distlock.Client {
	// readme-begin
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	c := distlock.New(redislock.New(rdb)) // Sentinel and Cluster: any redis.UniversalClient
	// readme-end
	return c
}

// Redlock shows a client on five independent Redis masters.
func Redlock() *distlock.Client {
	// readme-begin
	var clients []redis.UniversalClient
	for _, addr := range []string{"r1:6379", "r2:6379", "r3:6379", "r4:6379", "r5:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}))
	}
	c := distlock.New(redlock.New(clients)) // a lock is held by a majority: 3 of 5
	// readme-end
	return c
}

// Memory shows a client in memory.
func Memory() *distlock.Client {
	// readme-begin
	c := distlock.New(memlock.New()) // one process: for tests and examples
	// readme-end
	return c
}

// OpenURL shows a client made from a URL.
func OpenURL(ctx context.Context) (*distlock.Client, error) {
	// readme-begin
	// with the backend's package imported, e.g. _ "github.com/distlock-go/distlock/redislock"
	c, err := distlock.Open(ctx, "redis://localhost:6379/0", distlock.WithTTL(10*time.Second))
	// readme-end
	return c, err
}

// work stands for the user's critical section.
func work(ctx context.Context, token uint64) error { return ctx.Err() }

// Migrated shows, for users of redsync and bsm/redislock, a lock held for
// as long as the work takes.
func Migrated(ctx context.Context, rdb redis.UniversalClient) error {
	// readme-begin
	// One Client per program; each lock a lease of 10s, renewed until Unlock.
	c := distlock.New(redislock.New(rdb), distlock.WithTTL(10*time.Second))
	l, err := c.Mutex("orders:42").Lock(ctx) // waits, woken by the release, until ctx ends
	if err != nil {
		return err // wraps distlock.ErrNotObtained and ctx.Err()
	}
	defer l.Unlock(context.Background()) // repeated until confirmed, for at most 5s
	// The work's ctx ends if the lease is lost; the token goes with every write.
	return work(l.Context(ctx), l.Token())
	// readme-end
}

// Bounded shows a wait bounded the way a retry strategy bounds it.
func Bounded(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
	// readme-begin
	// bsm/redislock: &redislock.Options{RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 10)}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l, err := c.Mutex("report").Lock(ctx)
	if errors.Is(err, distlock.ErrNotObtained) {
		return nil, err // held elsewhere for the whole second (or, with ErrKindMismatch, used as another kind)
	}
	// readme-end
	return l, err
}

// Guarded shows the restart guard's settings.
func Guarded(ctx context.Context, rdb redis.UniversalClient) (*distlock.Client, error) {
	// readme-begin
	b := redislock.New(rdb, redislock.WithMaxTTL(10*time.Minute)) // the same maximum on every client of these servers
	// Only on a brand-new server, or one known to have lost no data since it started:
	if err := b.DeclareFresh(ctx); err != nil {
		return nil, err
	}
	c := distlock.New(b)
	// readme-end
	return c, nil
}

// ClientSettings shows the go-redis settings of docs/redis.md.
func ClientSettings() *redis.Client {
	// readme-begin
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // a call ends at its context's deadline
		MaxRetries:            -1,   // distlock retries, not the client
		DialerRetries:         1,    // one dial per connection attempt
	})
	// readme-end
	return rdb
}

// NoLongTTL shows a bsm/redislock call's one-hour TTL dropped for the
// watchdog.
func NoLongTTL(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
	// readme-begin
	// before (bsm/redislock): lock, err := locker.Obtain(ctx, "report", time.Hour, nil)
	l, err := c.Mutex("report").TryLock(ctx) // default TTL 30s, renewed until Unlock
	// readme-end
	return l, err
}
