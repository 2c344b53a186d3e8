package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redlock"
)

// This example needs five independent Redis masters, so it is compiled but
// not run by go test.
func Example() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		rdb := redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true, // the per-node timeout ends the call itself
			MaxRetries:            -1,   // a down master fails at once, with its own error
			DialerRetries:         1,
		})
		defer rdb.Close()
		clients = append(clients, rdb)
	}
	backend := redlock.New(clients)
	defer backend.Close()
	c := distlock.New(backend, distlock.WithTTL(10*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Mutex("orders:42").Lock(ctx)
	var qe *redlock.QuorumError
	switch {
	case errors.As(err, &qe):
		// Too many masters failed; qe.Nodes says which, and why.
		fmt.Println("no quorum:", err)
		return
	case err != nil:
		fmt.Println("could not lock:", err)
		return
	}
	defer l.Unlock(context.Background())

	// Pass the fencing token to the resource, and stop when the lease ends.
	work := l.Context(ctx)
	fmt.Println("token", l.Token(), work.Err())
}

// Opening a backend from a URL, as the CLI does.
func Example_url() {
	c, err := distlock.Open(context.Background(), "redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379?prefix=app:&node_timeout=20ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
}
