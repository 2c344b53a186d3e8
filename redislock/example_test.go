package redislock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redislock"
)

// This example needs a Redis server on localhost:6379, so it is compiled but
// not run by go test.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // a call ends at its context's deadline
		MaxRetries:            -1,   // a failed call reports its own cause
		DialerRetries:         1,
	})
	defer rdb.Close()
	backend := redislock.New(rdb)
	defer backend.Close()
	c := distlock.New(backend, distlock.WithTTL(10*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Mutex("orders:42").Lock(ctx)
	if err != nil {
		fmt.Println("could not lock:", err)
		return
	}
	defer l.Unlock(context.Background())
	fmt.Println("token", l.Token())
}

// Opening a backend from a URL, as the CLI does.
func Example_url() {
	c, err := distlock.Open(context.Background(), "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster?prefix=app:")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
}

// Require one replica to have the lock before using it.
func ExampleWithReplicas() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"10.0.0.1:26379"},
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	c := distlock.New(redislock.New(rdb, redislock.WithReplicas(1, 100*time.Millisecond)))
	_ = c
}
