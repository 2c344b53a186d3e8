// Command leader runs a scheduler on one process of many: every process
// campaigns, the one that wins leads until its lease is lost or it stops,
// and then another takes over.
//
//	leader -url redis://localhost:6379/0 -id scheduler-a
//
// It stops on SIGINT or SIGTERM, or after -for, and resigns so that
// another process leads at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/distlock-go/distlock"
	_ "github.com/distlock-go/distlock/memlock"   // mem:// URLs
	_ "github.com/distlock-go/distlock/redislock" // redis:// URLs
)

func main() {
	url := flag.String("url", "mem://", "backend URL; redis://host:port/db to elect among processes")
	id := flag.String("id", "scheduler", "this process's name, shown to the others")
	runFor := flag.Duration("for", 0, "stop after this long (default: on SIGINT or SIGTERM)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, *url, *id); err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		os.Exit(1)
	}
}

// readme-begin

func run(ctx context.Context, url, id string) error {
	c, err := distlock.Open(ctx, url, distlock.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	defer c.Close()

	e := c.Election("scheduler",
		distlock.WithTTL(5*time.Second), // a leader that dies is replaced within 5s
		distlock.WithMetadata(map[string]string{"id": id}))
	err = e.Run(ctx, func(ctx context.Context, term *distlock.Lock) error {
		// Only the leader gets here, and ctx ends when it stops leading.
		fmt.Printf("%s leads with token %d\n", id, term.Token())
		schedule(ctx, term.Token())
		if cause := context.Cause(ctx); errors.Is(cause, distlock.ErrLockLost) {
			fmt.Printf("%s lost the lead: %v\n", id, cause)
		}
		return nil // ignored after a loss: Run campaigns again
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Printf("%s resigned\n", id)
		return nil
	}
	return err
}

// readme-end

// schedule stands in for the work only the leader does: it runs until
// ctx ends, passing token to whatever it writes to.
func schedule(ctx context.Context, token uint64) {
	<-ctx.Done()
	_ = token
}
