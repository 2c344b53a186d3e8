package zklock_test

import (
	"context"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/zklock"
)

// Example takes a lock on a ZooKeeper ensemble through a connection of the
// caller's, which stays open when the backend closes.
func Example() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := distlock.New(zklock.New(conn, 10*time.Second))
	defer client.Close()

	l, err := client.Mutex("reports").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(context.Background())
	log.Printf("holding the lock with fencing token %d", l.Token())
}
