// Command reentrant runs a job under a re-entrant lock: code the job calls
// takes the same lock again without waiting for itself, and at the end the
// job hands the held lock to a worker that carries on, without a moment in
// which the lock is free.
//
//	reentrant -url mem://
//
// Re-entrant locks need a backend that offers them, as memlock does; on one
// that does not, the first Lock fails with an error that says so.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/distlock-go/distlock"
	_ "github.com/distlock-go/distlock/memlock"   // mem:// URLs
	_ "github.com/distlock-go/distlock/redislock" // redis:// URLs
)

func main() {
	url := flag.String("url", "mem://", "backend URL")
	flag.Parse()
	if err := run(context.Background(), *url); err != nil {
		fmt.Fprintln(os.Stderr, "reentrant:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string) error {
	// The logger says at once why a lock waits when the cause is not a
	// holder (a Redis server too new to trust: see the restart guard).
	c, err := distlock.Open(ctx, url, distlock.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := job(ctx, c)
	if err != nil {
		return err
	}
	if err := report(ctx, c, "job left"); err != nil {
		return err
	}
	if err := w.Unlock(ctx); err != nil {
		return err
	}
	return report(ctx, c, "worker left")
}

// readme-begin

// job holds "ledger" with an owner id: what it calls with ctx may take the
// lock again, and a worker given the id takes it over before the job ends.
func job(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
	id := distlock.NewOwnerID()
	ctx = distlock.ContextWithOwner(ctx, id)
	l, err := c.Mutex("ledger").Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Unlock(context.Background()) // the job's hold only

	if err := closeDay(ctx, c); err != nil {
		return nil, err
	}
	w, err := worker(context.Background(), c, id.Secret())
	if err != nil {
		return nil, err
	}
	return w, report(ctx, c, "worker entered")
}

func closeDay(ctx context.Context, c *distlock.Client) error {
	l, err := c.Mutex("ledger").Lock(ctx) // granted at once: ctx carries the owner id
	if err != nil {
		return err
	}
	defer l.Unlock(context.Background())
	return report(ctx, c, "closing the day")
}

// worker enters the lock with the job's owner id, as another process would
// after receiving the secret over a trusted channel.
func worker(ctx context.Context, c *distlock.Client, secret string) (*distlock.Lock, error) {
	id, err := distlock.ParseOwnerID(secret)
	if err != nil {
		return nil, err
	}
	return c.Mutex("ledger", distlock.WithOwner(id)).Lock(ctx)
}

// report prints what Inspect says of the lock (never who holds it).
func report(ctx context.Context, c *distlock.Client, when string) error {
	info, err := c.Inspect(ctx, "ledger")
	if err != nil {
		return err
	}
	fmt.Printf("%s: held %v, %d holds, token %d\n", when, info.Held, info.Holds, info.Token)
	return nil
}

// readme-end
