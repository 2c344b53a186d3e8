package etcdlock_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/etcdlock"
)

// Example takes a lock on an etcd cluster through a client of the
// caller's, which stays open when the backend closes.
func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	client := distlock.New(etcdlock.New(cli))
	defer client.Close()

	l, err := client.Mutex("reports").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(context.Background())
	log.Printf("holding the lock with fencing token %d", l.Token())
}
