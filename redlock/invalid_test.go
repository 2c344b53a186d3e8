package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// TestInvalidOption: an invalid option is recorded when applied, and every
// method then fails with an error wrapping driver.ErrInvalidBackend that
// names it; a nil Option is one of them, not skipped.
func TestInvalidOption(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		opts   []redlock.Option
		naming string
	}{
		{"zero node timeout", []redlock.Option{redlock.WithNodeTimeout(0)}, "WithNodeTimeout(0s)"},
		{"nil drift", []redlock.Option{redlock.WithDrift(nil)}, "WithDrift(nil)"},
		{"nil option", []redlock.Option{nil}, "a nil Option"},
		{"first of two", []redlock.Option{redlock.WithDrift(nil), redlock.WithNodeTimeout(-1)}, "WithDrift(nil)"},
	} {
		b := newBackend(t, []string{srv.Addr()}, tt.opts...)
		l := driver.Lease{Key: "k", Owner: "o"}
		_, aerr := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Second})
		_, ferr := b.Refresh(ctx, l, time.Second)
		_, ierr := b.Inspect(ctx, "k")
		_, werr := b.Watch(ctx, "k", "")
		for op, err := range map[string]error{"Acquire": aerr, "Release": b.Release(ctx, l), "Refresh": ferr, "Inspect": ierr, "Watch": werr} {
			if !errors.Is(err, driver.ErrInvalidBackend) || !strings.Contains(err.Error(), tt.naming) || !strings.HasPrefix(err.Error(), "redlock: ") {
				t.Errorf("%s: %s: %v; want a redlock error wrapping ErrInvalidBackend naming %s", tt.name, op, err, tt.naming)
			}
		}
	}
}
