package etcdlock_test

import (
	"errors"
	"fmt"
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

// TestEmptyNames: an empty key or owner is refused by every call that
// takes one, with driver.ErrInvalidKey, before anything is sent.
func TestEmptyNames(t *testing.T) {
	t.Parallel()
	b := newBackend(t, etcdtest.Start(t))
	ctx := timeout(t, 10*time.Second)
	req := func(key, owner string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: time.Second}
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Acquire empty key", func() error { _, err := b.Acquire(ctx, req("", "o")); return err }},
		{"Acquire empty owner", func() error { _, err := b.Acquire(ctx, req("k", "")); return err }},
		{"Release empty key", func() error { return b.Release(ctx, req("", "o").Lease) }},
		{"Release empty owner", func() error { return b.Release(ctx, req("k", "").Lease) }},
		{"Refresh empty key", func() error { _, err := b.Refresh(ctx, req("", "o").Lease, time.Second); return err }},
		{"Refresh empty owner", func() error { _, err := b.Refresh(ctx, req("k", "").Lease, time.Second); return err }},
		{"Watch empty key", func() error { _, err := b.Watch(ctx, "", ""); return err }},
		{"Inspect empty key", func() error { _, err := b.Inspect(ctx, ""); return err }},
		{"Break empty key", func() error { _, err := b.Break(ctx, ""); return err }},
	} {
		if err := c.call(); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("%s: %v; want driver.ErrInvalidKey", c.name, err)
		}
	}
}
