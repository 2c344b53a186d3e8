// Command cronjob is a job that cron starts on every host at the same time.
// The host that gets the lock runs the job; the others skip this round.
//
//	# crontab on every host
//	0 2 * * *  DISTLOCK_URL=redis://locks.internal:6379/0 cronjob
//
// It exits 0 when it ran the job or skipped it, and 1 when the job failed,
// was interrupted, or lost its lease, or when no host could run it: a
// Redis server that may have lost data holds new locks back for a while
// (its restart guard), and the job says so rather than skip.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/distlock-go/distlock"
	_ "github.com/distlock-go/distlock/memlock"   // mem:// URLs
	_ "github.com/distlock-go/distlock/redislock" // redis:// URLs
)

func main() {
	url := flag.String("url", os.Getenv("DISTLOCK_URL"), "backend URL (default $DISTLOCK_URL)")
	ttl := flag.Duration("ttl", 30*time.Second, "lease length; a crashed host holds the job up this long at most")
	work := flag.Duration("work", 2*time.Second, "how long the job takes")
	flag.Parse()
	if err := run(*url, *ttl, *work); err != nil {
		fmt.Fprintln(os.Stderr, "cronjob:", err)
		os.Exit(1)
	}
}

func run(url string, ttl, work time.Duration) error {
	// SIGTERM is how cron, systemd and Kubernetes stop a job: stop the work
	// and give the lock back rather than leave it to expire.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := distlock.Open(ctx, url, distlock.WithTTL(ttl))
	if err != nil {
		return err
	}
	defer c.Close()

	l, err := c.Mutex("jobs:nightly-report").TryLock(ctx)
	if errors.Is(err, distlock.ErrRestartGuard) {
		// Nobody runs the job this round: a failure to report, with its
		// cause, not a skip.
		return err
	}
	if errors.Is(err, distlock.ErrNotObtained) {
		fmt.Println("skipped: another host is running the report")
		return nil
	}
	if err != nil {
		return err
	}
	defer l.Unlock(context.Background())

	fmt.Printf("running the report (fencing token %d)\n", l.Token())
	if err := report(l.Context(ctx), work); err != nil {
		return fmt.Errorf("report stopped: %w", err)
	}
	fmt.Println("report done")
	return nil
}

// report stands for the job. It stops as soon as ctx ends: on SIGTERM, or
// when the lease is lost and another host may start the job.
func report(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
