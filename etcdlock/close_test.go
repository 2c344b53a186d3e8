package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestCloseRace: Close while Acquire (which starts a lease's keep-alive)
// and Watch run on other goroutines. No goroutine of the backend may start
// while Close waits for them (the race detector sees it), and calls after
// Close fail with ErrInvalidBackend.
func TestCloseRace(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	ctx := timeout(t, 60*time.Second)
	for round := range 20 {
		b := etcdlock.New(cli)
		key := uniqueKey("close")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 6 {
			wg.Go(func() {
				<-start
				// A TTL of its own: each attempt grants a lease and starts
				// its keep-alive.
				req := driver.Request{Lease: driver.Lease{Key: fmt.Sprint(key, i), Owner: "o"}, TTL: time.Duration(round*6+i+1) * time.Second}
				_, _ = b.Acquire(ctx, req)
				if w, err := b.Watch(ctx, key, ""); err == nil {
					_ = w.Close()
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		if err := b.Close(); err != nil {
			t.Errorf("Close again: %v", err)
		}
		req := driver.Request{Lease: driver.Lease{Key: key, Owner: "late"}, TTL: time.Second}
		if _, err := b.Acquire(ctx, req); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Fatalf("Acquire after Close: %v; want ErrInvalidBackend", err)
		}
		if _, err := b.Watch(ctx, key, ""); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Fatalf("Watch after Close: %v; want ErrInvalidBackend", err)
		}
		if err := b.Release(ctx, req.Lease); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Fatalf("Release after Close: %v; want ErrInvalidBackend", err)
		}
		if _, err := b.Inspect(ctx, key); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Fatalf("Inspect after Close: %v; want ErrInvalidBackend", err)
		}
	}
}

// TestInvalidOption: a backend given an invalid option fails every
// method at once with an error wrapping ErrInvalidBackend that names the
// option; the option is never ignored, nor kept to fail later.
func TestInvalidOption(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	ctx := timeout(t, 30*time.Second)
	req := driver.Request{Lease: driver.Lease{Key: uniqueKey("invalid-option"), Owner: "o"}, TTL: 5 * time.Second}
	for _, o := range []struct {
		name, says string
		opts       []etcdlock.Option
	}{
		{"nil drift", "WithDrift(nil)", []etcdlock.Option{etcdlock.WithDrift(nil)}},
		{"nil option", "nil Option", []etcdlock.Option{nil}},
		{"first invalid option", "nil Option", []etcdlock.Option{etcdlock.WithPrefix("p/"), nil, etcdlock.WithDrift(nil)}},
	} {
		b := newBackend(t, c, o.opts...)
		check := func(method string, err error) {
			t.Helper()
			if !errors.Is(err, distlock.ErrInvalidBackend) || !strings.HasPrefix(err.Error(), "etcdlock: ") || !strings.Contains(err.Error(), o.says) {
				t.Errorf("%s: %s: %v; want an etcdlock error wrapping ErrInvalidBackend that says %q", o.name, method, err, o.says)
			}
		}
		_, err := b.Acquire(ctx, req)
		check("Acquire", err)
		check("Release", b.Release(ctx, req.Lease))
		_, err = b.Refresh(ctx, req.Lease, time.Second)
		check("Refresh", err)
		_, err = b.Inspect(ctx, "k")
		check("Inspect", err)
		_, err = b.List(ctx, "")
		check("List", err)
		_, err = b.Break(ctx, "k")
		check("Break", err)
		w, err := b.Watch(ctx, "k", "")
		if w != nil {
			_ = w.Close()
		}
		check("Watch", err)
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := distlock.New(b).Mutex("k").Lock(lctx); !errors.Is(err, distlock.ErrInvalidBackend) || lctx.Err() != nil {
			t.Errorf("%s: Lock: %v (ctx: %v); want ErrInvalidBackend at once", o.name, err, lctx.Err())
		}
		cancel()
	}
}
