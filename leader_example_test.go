package distlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func ExampleElection() {
	c := distlock.New(memlock.New()) // or a shared backend: redislock.New(rdb), ...
	e := c.Election("scheduler",
		distlock.WithTTL(10*time.Second),
		distlock.WithMetadata(map[string]string{"id": "scheduler-a"}))

	ctx, stop := context.WithTimeout(context.Background(), 50*time.Millisecond) // until shutdown, in a real program
	defer stop()
	err := e.Run(ctx, func(ctx context.Context, term *distlock.Lock) error {
		// Lead until ctx is done: the lease was lost or the program stops.
		info, _ := e.Leader(ctx) // what every other process sees
		fmt.Println("leading as", info.Meta["id"], "with token", term.Token())
		<-ctx.Done()
		return nil
	})
	fmt.Println(err)
	info, _ := e.Leader(context.Background())
	fmt.Println("leader after shutdown:", info.Held)
	// Output:
	// leading as scheduler-a with token 1
	// context deadline exceeded
	// leader after shutdown: false
}
