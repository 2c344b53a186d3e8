package main_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestQuickstart runs the README's program while the test holds the
// order's lock: it must wait for the release, then do its work with the
// next fencing token.
func TestQuickstart(t *testing.T) {
	addr, c := exampletest.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	held, err := c.Mutex("orders:42").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := exampletest.Start(t, nil, "quickstart", "-redis", addr)
	// While the lock is held elsewhere the program must not get past Lock.
	select {
	case <-p.Done():
		stdout, stderr := p.Output()
		t.Fatalf("quickstart finished while the lock was held elsewhere\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	case <-time.After(500 * time.Millisecond):
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := exampletest.WantTokenLines(t, p.Wait(t, 0), held.Token(), "order 42 updated with fencing token %d")

	// Run again: a later holding gets a higher token.
	stdout, _ := exampletest.Run(t, 0, nil, "quickstart", "-redis", addr)
	exampletest.WantTokenLines(t, stdout, next, "order 42 updated with fencing token %d")
}

// TestQuickstartNewServer: on a redis-server that has just started, the
// restart guard holds the order's lock back for a minute; the program says
// so while it waits, instead of waiting in silence.
func TestQuickstartNewServer(t *testing.T) {
	t.Parallel()
	p := exampletest.Start(t, nil, "quickstart", "-redis", exampletest.StartNewRedis(t))
	p.WaitStderr(t, "restart guard")
}
