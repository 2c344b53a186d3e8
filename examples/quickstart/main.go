// Command quickstart updates order 42 while holding its lock on Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redislock"
)

func main() {
	addr := flag.String("redis", "localhost:6379", "Redis server address")
	flag.Parse()

	rdb := redis.NewClient(&redis.Options{Addr: *addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	// The logger says at once why a lock waits when the cause is not a
	// holder (a Redis server too new to trust, say: see the restart guard).
	c := distlock.New(redislock.New(rdb), distlock.WithTTL(10*time.Second), distlock.WithLogger(slog.Default()))

	if err := processOrder(context.Background(), c, 42); err != nil {
		log.Fatal(err)
	}
}

// processOrder updates order id while holding the order's lock.
func processOrder(ctx context.Context, c *distlock.Client, id int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	l, err := c.Mutex(fmt.Sprint("orders:", id)).Lock(ctx) // waits, woken by the release; never gives up on its own
	if err != nil {
		return err // wraps distlock.ErrNotObtained and ctx.Err()
	}
	defer l.Unlock(context.Background())

	// Work under a context that is cancelled if the lease is lost, and pass
	// the fencing token to what you write to.
	return updateOrder(l.Context(ctx), id, l.Token())
}

// updateOrder stands for the work. A real one writes to a store that
// rejects tokens lower than the highest it has accepted (see package fence).
func updateOrder(ctx context.Context, id int, token uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fmt.Printf("order %d updated with fencing token %d\n", id, token)
	return nil
}
