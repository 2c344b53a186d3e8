package redisfence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/fence/redisfence"
	"github.com/distlock-go/distlock/redislock"
)

// ExampleSet writes a report to Redis with the token of the lock that
// guards it. A holder whose lease ended while it was paused finds its
// write refused once its successor has written.
func ExampleSet() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c := distlock.New(redislock.New(rdb))
	l, err := c.Mutex("report").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Unlock(ctx)

	err = redisfence.Set(l.Context(ctx), rdb, "report", "final", l.Token())
	if errors.Is(err, fence.ErrStale) {
		fmt.Println("a later holder has written the report")
	}
}
