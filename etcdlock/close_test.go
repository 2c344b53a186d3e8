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

// TestInvalidRequest: a request that breaks the contract is refused by
// every call that takes it, before anything is sent, with an etcdlock
// error wrapping the contract's error for it: ErrInvalidKey for a key no
// etcd key can stand for, ErrInvalidRequest for an empty owner, a TTL that
// is not positive..., ErrUnsupported for what only a mutex can be.
func TestInvalidRequest(t *testing.T) {
	t.Parallel()
	b := newBackend(t, etcdtest.Start(t))
	ctx := timeout(t, 20*time.Second)
	good := driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}
	long := strings.Repeat("k", driver.MaxKeyLen+1)
	for _, c := range []struct {
		name string
		edit func(r *driver.Request)
		want error
	}{
		{"empty key", func(r *driver.Request) { r.Key = "" }, driver.ErrInvalidKey},
		{"long key", func(r *driver.Request) { r.Key = long }, driver.ErrInvalidKey},
		{"empty owner", func(r *driver.Request) { r.Owner = "" }, driver.ErrInvalidRequest},
		{"long owner", func(r *driver.Request) { r.Owner = strings.Repeat("o", driver.MaxOwnerLen+1) }, driver.ErrInvalidRequest},
		{"zero TTL", func(r *driver.Request) { r.TTL = 0 }, driver.ErrInvalidRequest},
		{"unknown kind", func(r *driver.Request) { r.Kind = driver.Permit + 1 }, driver.ErrInvalidRequest},
		{"semaphore of 0", func(r *driver.Request) { r.Kind = driver.Permit }, driver.ErrInvalidRequest},
		{"fair reader", func(r *driver.Request) { r.Kind, r.Fair = driver.Read, true }, errors.ErrUnsupported},
		{"re-entrant writer", func(r *driver.Request) { r.Kind, r.Reentry = driver.Write, "id" }, errors.ErrUnsupported},
	} {
		req := good
		c.edit(&req)
		if g, err := b.Acquire(ctx, req); !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "etcdlock: ") {
			t.Errorf("Acquire with %s: %+v, %v; want an etcdlock error wrapping %q", c.name, g, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		l    driver.Lease
		ttl  time.Duration
		want error
	}{
		{"empty key", driver.Lease{Owner: "o"}, time.Second, driver.ErrInvalidKey},
		{"long key", driver.Lease{Key: long, Owner: "o"}, time.Second, driver.ErrInvalidKey},
		{"empty owner", driver.Lease{Key: "k"}, time.Second, driver.ErrInvalidRequest},
		{"long owner", driver.Lease{Key: "k", Owner: strings.Repeat("o", driver.MaxOwnerLen+1)}, time.Second, driver.ErrInvalidRequest},
		{"unknown kind", driver.Lease{Key: "k", Owner: "o", Kind: driver.Permit + 1}, time.Second, driver.ErrInvalidRequest},
		{"zero TTL", driver.Lease{Key: "k", Owner: "o"}, 0, driver.ErrInvalidRequest},
	} {
		if c.ttl > 0 {
			if err := b.Release(ctx, c.l); !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "etcdlock: ") {
				t.Errorf("Release with %s: %v; want an etcdlock error wrapping %q", c.name, err, c.want)
			}
		}
		if _, err := b.Refresh(ctx, c.l, c.ttl); !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "etcdlock: ") {
			t.Errorf("Refresh with %s: %v; want an etcdlock error wrapping %q", c.name, err, c.want)
		}
	}
	for _, key := range []string{"", long} {
		check := func(method string, err error) {
			t.Helper()
			if !errors.Is(err, driver.ErrInvalidKey) {
				t.Errorf("%s of a key of %d bytes: %v; want ErrInvalidKey", method, len(key), err)
			}
		}
		_, err := b.Inspect(ctx, key)
		check("Inspect", err)
		_, err = b.Break(ctx, key)
		check("Break", err)
		w, err := b.Watch(ctx, key, "")
		if w != nil {
			_ = w.Close()
		}
		check("Watch", err)
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
