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

// TestBadRequests: every request the contract or the table cannot take is
// refused before any statement, with an error that says what is wrong,
// starts with the package's name, and wraps the contract's error for it:
// ErrInvalidKey for a key, ErrInvalidRequest for an owner, a kind, a TTL
// or a limit, errors.ErrUnsupported for what the backend does not offer.
func TestBadRequests(t *testing.T) {
	b := sqliteFile(t).backend(t)
	ctx := context.Background()
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	lease := func(key, owner string, kind driver.Kind) driver.Lease {
		return driver.Lease{Key: key, Owner: owner, Kind: kind}
	}
	for _, tc := range []struct {
		name string
		req  driver.Request
		want error
		says string
	}{
		{"empty key", driver.Request{Lease: lease("", "o", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidKey, "empty key"},
		{"long key", driver.Request{Lease: lease(long("k", driver.MaxKeyLen+1), "o", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidKey, "1025 bytes"},
		{"key not UTF-8", driver.Request{Lease: lease("k\xff", "o", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidKey, "UTF-8"},
		{"key with NUL", driver.Request{Lease: lease("k\x00", "o", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidKey, "NUL"},
		{"empty owner", driver.Request{Lease: lease("k", "", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidRequest, "empty owner"},
		{"long owner", driver.Request{Lease: lease("k", long("o", driver.MaxOwnerLen+1), driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidRequest, "256 bytes"},
		{"owner not UTF-8", driver.Request{Lease: lease("k", "o\xff", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidRequest, "UTF-8"},
		{"owner with NUL", driver.Request{Lease: lease("k", "o\x00", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidRequest, "NUL"},
		{"owner with comma", driver.Request{Lease: lease("k", "a,b", driver.Exclusive), TTL: time.Minute}, driver.ErrInvalidRequest, "comma"},
		{"unknown kind", driver.Request{Lease: lease("k", "o", driver.Permit+1), TTL: time.Minute}, driver.ErrInvalidRequest, "kind 4"},
		{"zero TTL", driver.Request{Lease: lease("k", "o", driver.Exclusive)}, driver.ErrInvalidRequest, "TTL 0s"},
		{"negative TTL", driver.Request{Lease: lease("k", "o", driver.Exclusive), TTL: -time.Second}, driver.ErrInvalidRequest, "TTL -1s"},
		{"no permits", driver.Request{Lease: lease("k", "o", driver.Permit), TTL: time.Minute}, driver.ErrInvalidRequest, "0 permits"},
		{"fair read", driver.Request{Lease: lease("k", "o", driver.Read), TTL: time.Minute, Fair: true}, errors.ErrUnsupported, "fair"},
		{"re-entrant write", driver.Request{Lease: lease("k", "o", driver.Write), TTL: time.Minute, Reentry: "r"}, errors.ErrUnsupported, "re-entrant"},
	} {
		_, err := b.Acquire(ctx, tc.req)
		checkRefusal(t, "Acquire: "+tc.name, err, tc.want, tc.says)
		if tc.req.TTL <= 0 || tc.req.Fair || tc.req.Reentry != "" || tc.req.Kind == driver.Permit {
			continue // the rest concern the lease alone
		}
		checkRefusal(t, "Release: "+tc.name, b.Release(ctx, tc.req.Lease), tc.want, tc.says)
		_, err = b.Refresh(ctx, tc.req.Lease, time.Minute)
		checkRefusal(t, "Refresh: "+tc.name, err, tc.want, tc.says)
	}
	_, err := b.Refresh(ctx, lease("k", "o", driver.Exclusive), 0)
	checkRefusal(t, "Refresh to 0s", err, driver.ErrInvalidRequest, "TTL 0s")
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
