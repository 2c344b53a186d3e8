package distlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

// ExampleWithLogger logs what the locks of a client do. A program logs to
// os.Stderr, usually at Info: lost leases (Warn) and failing renewals
// (Info). At Debug every attempt, grant and release is logged too.
func ExampleWithLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ // os.Stderr in a program
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key { // times differ from run to run
			case slog.TimeKey, "latency", "wait", "valid_for", "held":
				return slog.Attr{}
			}
			return a
		},
	}))
	ctx := context.Background()
	c := distlock.New(memlock.New(), distlock.WithLogger(logger))
	l, err := c.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		return
	}
	_ = l.Unlock(ctx)
	// Output:
	// level=DEBUG msg="distlock: attempt" key=nightly-report backend=memlock outcome=granted attempt=1
	// level=DEBUG msg="distlock: acquired" key=nightly-report backend=memlock token=1 attempts=1
	// level=DEBUG msg="distlock: released" key=nightly-report backend=memlock token=1
}

// ExampleObserverFunc counts what a lock's callers wait for.
func ExampleObserverFunc() {
	var attempts int
	obs := distlock.ObserverFunc(func(_ context.Context, e distlock.Event) {
		switch e.Type {
		case distlock.EventAttempt:
			attempts++
		case distlock.EventAcquired:
			fmt.Println("acquired", e.Key, "token", e.Token, "after", attempts, "attempt(s)")
		case distlock.EventLost:
			fmt.Println("lost", e.Key, "cause", e.Cause)
		}
	})
	ctx := context.Background()
	l, err := distlock.New(memlock.New()).Mutex("k", distlock.WithObserver(obs)).Lock(ctx)
	if err != nil {
		return
	}
	_ = l.Unlock(ctx)
	// Output: acquired k token 1 after 1 attempt(s)
}
