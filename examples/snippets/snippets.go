// Package snippets holds the short README examples that are not whole
// programs, so that the compiler checks them (examples/readme_test.go
// checks that the README shows them unchanged).
package snippets

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	distlockotel "github.com/distlock-go/distlock/otel"
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
