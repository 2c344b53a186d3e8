package sqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// TestBadRequests: a key or an owner the table cannot store, though the
// contract allows it, is refused before any statement, with an error that
// says what is wrong, starts with the package's name, and wraps the
// contract's error for it: ErrInvalidKey for a key, ErrInvalidRequest for
// an owner. (What the contract rules out for every backend is
// distlocktest's InvalidRequest.)
func TestBadRequests(t *testing.T) {
	b := sqliteFile(t).backend(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		lease driver.Lease
		want  error
		says  string
	}{
		{"key not UTF-8", driver.Lease{Key: "k\xff", Owner: "o"}, driver.ErrInvalidKey, "UTF-8"},
		{"key with NUL", driver.Lease{Key: "k\x00", Owner: "o"}, driver.ErrInvalidKey, "NUL"},
		{"owner not UTF-8", driver.Lease{Key: "k", Owner: "o\xff"}, driver.ErrInvalidRequest, "UTF-8"},
		{"owner with NUL", driver.Lease{Key: "k", Owner: "o\x00"}, driver.ErrInvalidRequest, "NUL"},
		{"owner with comma", driver.Lease{Key: "k", Owner: "a,b"}, driver.ErrInvalidRequest, "comma"},
	} {
		_, err := b.Acquire(ctx, driver.Request{Lease: tc.lease, TTL: time.Minute})
		checkRefusal(t, "Acquire: "+tc.name, err, tc.want, tc.says)
		checkRefusal(t, "Release: "+tc.name, b.Release(ctx, tc.lease), tc.want, tc.says)
		_, err = b.Refresh(ctx, tc.lease, time.Minute)
		checkRefusal(t, "Refresh: "+tc.name, err, tc.want, tc.says)
	}
}

func checkRefusal(t *testing.T, what string, err, want error, says string) {
	t.Helper()
	switch {
	case !errors.Is(err, want):
		t.Errorf("%s: %v; want an error wrapping %v", what, err, want)
	case !strings.HasPrefix(err.Error(), "sqllock: ") || !strings.Contains(err.Error(), says):
		t.Errorf("%s: %q; want it to start with \"sqllock: \" and say %q", what, err, says)
	}
}

// TestBadOptions: New refuses an option that cannot work with an error
// that names it and wraps driver.ErrInvalidBackend; of several, the first
// is reported.
func TestBadOptions(t *testing.T) {
	db := sqliteFile(t).open(t)
	for _, tc := range []struct {
		name string
		opts []sqllock.Option
		says string
	}{
		{"nil drift", []sqllock.Option{sqllock.WithDrift(nil)}, "WithDrift(nil)"},
		{"zero loss check", []sqllock.Option{sqllock.WithLossCheck(0)}, "WithLossCheck(0s)"},
		{"negative loss check", []sqllock.Option{sqllock.WithLossCheck(-time.Second)}, "WithLossCheck(-1s)"},
		{"the first of two", []sqllock.Option{sqllock.WithLossCheck(0), sqllock.WithDrift(nil)}, "WithLossCheck(0s)"},
		{"connection scope on SQLite", []sqllock.Option{sqllock.WithConnectionScope()}, "WithConnectionScope"},
		{"listener on SQLite", []sqllock.Option{sqllock.WithListener(idleListener{})}, "WithListener"},
	} {
		b, err := sqllock.New(db, tc.opts...)
		switch {
		case b != nil || !errors.Is(err, driver.ErrInvalidBackend):
			t.Errorf("%s: New: backend %t, %v; want no backend and an error wrapping ErrInvalidBackend", tc.name, b != nil, err)
		case !strings.HasPrefix(err.Error(), "sqllock: ") || !strings.Contains(err.Error(), tc.says):
			t.Errorf("%s: New: %q; want it to start with \"sqllock: \" and say %q", tc.name, err, tc.says)
		}
	}
}

// idleListener is a Listener that hears nothing.
type idleListener struct{}

func (idleListener) Listen(ctx context.Context, _ string, _ func(), _ func(string)) error {
	<-ctx.Done()
	return nil
}
