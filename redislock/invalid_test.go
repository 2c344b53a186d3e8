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

// TestInvalidRequest: the backend, called directly, refuses what the
// contract does not allow (driver.Request.Validate, Lease.Validate) and a
// TTL below the millisecond Redis counts in, each with an error of
// redislock wrapping the contract's error, before it sends anything.
func TestInvalidRequest(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx := context.Background()
	long := strings.Repeat("k", driver.MaxKeyLen+1)
	longOwner := strings.Repeat("o", driver.MaxOwnerLen+1)
	lease := func(key, owner string) driver.Lease { return driver.Lease{Key: key, Owner: owner} }
	for _, tt := range []struct {
		name string
		req  driver.Request
		want error
	}{
		{"empty key", driver.Request{Lease: lease("", "o"), TTL: time.Second}, driver.ErrInvalidKey},
		{"long key", driver.Request{Lease: lease(long, "o"), TTL: time.Second}, driver.ErrInvalidKey},
		{"empty owner", driver.Request{Lease: lease("k", ""), TTL: time.Second}, driver.ErrInvalidRequest},
		{"long owner", driver.Request{Lease: lease("k", longOwner), TTL: time.Second}, driver.ErrInvalidRequest},
		{"zero TTL", driver.Request{Lease: lease("k", "o"), TTL: 0}, driver.ErrInvalidRequest},
		{"negative TTL", driver.Request{Lease: lease("k", "o"), TTL: -time.Second}, driver.ErrInvalidRequest},
		{"TTL below a millisecond", driver.Request{Lease: lease("k", "o"), TTL: 500 * time.Microsecond}, driver.ErrInvalidRequest},
		{"unknown kind", driver.Request{Lease: driver.Lease{Key: "k", Owner: "o", Kind: 9}, TTL: time.Second}, driver.ErrInvalidRequest},
		{"semaphore of no permits", driver.Request{Lease: driver.Lease{Key: "k", Owner: "o", Kind: driver.Permit}, TTL: time.Second}, driver.ErrInvalidRequest},
		{"fair reader", driver.Request{Lease: driver.Lease{Key: "k", Owner: "o", Kind: driver.Read}, TTL: time.Second, Fair: true}, errors.ErrUnsupported},
		{"re-entrant writer", driver.Request{Lease: driver.Lease{Key: "k", Owner: "o", Kind: driver.Write}, TTL: time.Second, Reentry: "r"}, errors.ErrUnsupported},
	} {
		g, err := b.Acquire(ctx, tt.req)
		if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "redislock: ") {
			t.Errorf("Acquire with %s: %+v, %v; want a redislock error wrapping %q", tt.name, g, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		l    driver.Lease
		ttl  time.Duration
		want error
	}{
		{"empty key", lease("", "o"), time.Second, driver.ErrInvalidKey},
		{"long key", lease(long, "o"), time.Second, driver.ErrInvalidKey},
		{"empty owner", lease("k", ""), time.Second, driver.ErrInvalidRequest},
		{"long owner", lease("k", longOwner), time.Second, driver.ErrInvalidRequest},
		{"unknown kind", driver.Lease{Key: "k", Owner: "o", Kind: 9}, time.Second, driver.ErrInvalidRequest},
		{"zero TTL", lease("k", "o"), 0, driver.ErrInvalidRequest},
		{"TTL below a millisecond", lease("k", "o"), 500 * time.Microsecond, driver.ErrInvalidRequest},
	} {
		if _, err := b.Refresh(ctx, tt.l, tt.ttl); !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "redislock: ") {
			t.Errorf("Refresh with %s: %v; want a redislock error wrapping %q", tt.name, err, tt.want)
		}
		if tt.ttl <= 0 || tt.ttl < time.Millisecond {
			continue // a bad TTL is no bad lease to release
		}
		if err := b.Release(ctx, tt.l); !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "redislock: ") {
			t.Errorf("Release with %s: %v; want a redislock error wrapping %q", tt.name, err, tt.want)
		}
	}
	for _, key := range []string{"", long} {
		if _, err := b.Inspect(ctx, key); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("Inspect of a key of %d bytes: %v; want driver.ErrInvalidKey", len(key), err)
		}
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
