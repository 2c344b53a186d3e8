package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestInvalidRequest: a TTL below the millisecond Redis counts in is
// refused, on Acquire and on Refresh, with a redislock error wrapping
// driver.ErrInvalidRequest, before anything is sent, and the holding it
// would have cut short is kept. (What the contract rules out for every
// backend is distlocktest's InvalidRequest.)
func TestInvalidRequest(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx := context.Background()
	held := driver.Lease{Key: "sub-ms", Owner: "o"}
	if g, err := b.Acquire(ctx, driver.Request{Lease: held, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, driver.ErrInvalidRequest) || !strings.HasPrefix(err.Error(), "redislock: ") {
			t.Errorf("%s with a TTL below a millisecond: %v; want a redislock error wrapping %q", what, err, driver.ErrInvalidRequest)
		}
	}
	g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: 500 * time.Microsecond})
	refused("Acquire", err)
	if g.Acquired {
		t.Errorf("Acquire with a TTL below a millisecond: granted")
	}
	_, err = b.Refresh(ctx, held, 500*time.Microsecond)
	refused("Refresh", err)
	if info, err := b.Inspect(ctx, held.Key); err != nil || !info.Held {
		t.Errorf("after the refused Refresh: %+v, %v; want the lock still held", info, err)
	}
}

// TestInvalidOption: an invalid option is recorded when applied, never
// stored and used later, and every method then fails with an error
// wrapping driver.ErrInvalidBackend that names it.
func TestInvalidOption(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		opts   []redislock.Option
		naming string
	}{
		{"negative replicas", []redislock.Option{redislock.WithReplicas(-1, time.Second)}, "WithReplicas(-1, 1s)"},
		{"replicas without a timeout", []redislock.Option{redislock.WithReplicas(1, 0)}, "WithReplicas(1, 0s)"},
		{"nil drift", []redislock.Option{redislock.WithDrift(nil)}, "WithDrift(nil)"},
		{"nil option", []redislock.Option{nil}, "a nil Option"},
		{"first of two", []redislock.Option{redislock.WithDrift(nil), redislock.WithReplicas(-1, 0)}, "WithDrift(nil)"},
	} {
		b := newBackend(t, newClient(t, srv.Addr()), tt.opts...)
		l := driver.Lease{Key: "k", Owner: "o"}
		_, aerr := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Second})
		_, ferr := b.Refresh(ctx, l, time.Second)
		_, ierr := b.Inspect(ctx, "k")
		_, werr := b.Watch(ctx, "k", "")
		for op, err := range map[string]error{"Acquire": aerr, "Release": b.Release(ctx, l), "Refresh": ferr, "Inspect": ierr, "Watch": werr} {
			if !errors.Is(err, driver.ErrInvalidBackend) || !strings.Contains(err.Error(), tt.naming) || !strings.HasPrefix(err.Error(), "redislock: ") {
				t.Errorf("%s: %s: %v; want a redislock error wrapping ErrInvalidBackend naming %s", tt.name, op, err, tt.naming)
			}
		}
	}
}
