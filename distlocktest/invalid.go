package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// testInvalidInput: the root package refuses what it cannot ask of a
// backend (a key, a TTL, an option out of bounds, no backend) with the
// error that says so, on TryLock and Lock alike.
func testInvalidInput(t testing.TB, h Harness) {
	c := newClient(t, h)
	ctx := timeout(t, 5*time.Second)
	cases := []struct {
		name string
		m    *distlock.Mutex
		want error
	}{
		{"empty key", c.Mutex(""), distlock.ErrInvalidKey},
		{"overlong key", c.Mutex(string(make([]byte, distlock.MaxKeyLen+1))), distlock.ErrInvalidKey},
		{"zero TTL", c.Mutex("k", distlock.WithTTL(0)), distlock.ErrInvalidTTL},
		{"negative TTL", c.Mutex("k", distlock.WithTTL(-time.Second)), distlock.ErrInvalidTTL},
		{"tiny TTL", c.Mutex("k", distlock.WithTTL(time.Nanosecond)), distlock.ErrInvalidTTL},
		{"refresh interval above TTL", c.Mutex("k", distlock.WithTTL(time.Second), distlock.WithRefreshInterval(2*time.Second)), distlock.ErrInvalidArgument},
		{"nil backoff", c.Mutex("k", distlock.WithBackoff(nil)), distlock.ErrInvalidArgument},
		{"nil backend", distlock.New(nil).Mutex("k"), distlock.ErrInvalidBackend},
	}
	for _, tc := range cases {
		if l, err := tc.m.TryLock(ctx); !errors.Is(err, tc.want) {
			if l != nil {
				_ = l.Unlock(ctx)
			}
			t.Errorf("%s: TryLock error %v; want %v", tc.name, err, tc.want)
		}
		if _, err := tc.m.Lock(ctx); !errors.Is(err, tc.want) {
			t.Errorf("%s: Lock error %v; want %v", tc.name, err, tc.want)
		}
	}
}

// testInvalidRequest: the backend, called directly, refuses every request
// the contract rules out (driver.Request.Validate, Lease.Validate,
// ValidateKey), before it takes or changes anything, with an error
// wrapping the contract's error for it: driver.ErrInvalidKey for a key out
// of bounds, driver.ErrInvalidRequest for the rest, errors.ErrUnsupported
// for what only a mutex can be and for what the backend does not claim.
// A refusal that grants, panics, does not return, stores anything, or
// disturbs a holding of the key fails the check.
func testInvalidRequest(t testing.TB, h Harness) {
	b := h.NewBackend(t)
	caps := b.Capabilities()
	key := uniqueKey(t)
	held := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("holder")}, TTL: 30 * time.Second}
	acquire(t, timeout(t, 10*time.Second), b, held)
	long, longOwner := strings.Repeat("k", driver.MaxKeyLen+1), strings.Repeat("o", driver.MaxOwnerLen+1)

	// Requests for a free key, so that one let through would be granted.
	free := uniqueKey(t)
	mutex := func(edit func(r *driver.Request)) driver.Request {
		r := driver.Request{Lease: driver.Lease{Key: free, Owner: owner("bad")}, TTL: held.TTL}
		edit(&r)
		return r
	}
	requests := []struct {
		what string
		req  driver.Request
		want error
	}{
		{"an empty key", mutex(func(r *driver.Request) { r.Key = "" }), driver.ErrInvalidKey},
		{"a key over MaxKeyLen", mutex(func(r *driver.Request) { r.Key = long }), driver.ErrInvalidKey},
		{"an empty owner", mutex(func(r *driver.Request) { r.Owner = "" }), driver.ErrInvalidRequest},
		{"an owner over MaxOwnerLen", mutex(func(r *driver.Request) { r.Owner = longOwner }), driver.ErrInvalidRequest},
		{"a zero TTL", mutex(func(r *driver.Request) { r.TTL = 0 }), driver.ErrInvalidRequest},
		{"a negative TTL", mutex(func(r *driver.Request) { r.TTL = -time.Second }), driver.ErrInvalidRequest},
		{"an unknown kind", mutex(func(r *driver.Request) { r.Kind = driver.Permit + 1 }), driver.ErrInvalidRequest},
		{"a semaphore of no permits", mutex(func(r *driver.Request) { r.Kind = driver.Permit }), driver.ErrInvalidRequest},
		{"a semaphore of -1 permits", mutex(func(r *driver.Request) { r.Kind, r.Limit = driver.Permit, -1 }), driver.ErrInvalidRequest},
		{"a fair read lock", mutex(func(r *driver.Request) { r.Kind, r.Fair = driver.Read, true }), errors.ErrUnsupported},
		{"a re-entrant write lock", mutex(func(r *driver.Request) { r.Kind, r.Reentry = driver.Write, owner("id") }), errors.ErrUnsupported},
	}
	for _, u := range []struct {
		claimed bool
		what    string
		edit    func(r *driver.Request)
	}{
		{caps.Fair, "a fair mutex", func(r *driver.Request) { r.Fair = true }},
		{caps.Reentrant, "a re-entrant mutex", func(r *driver.Request) { r.Reentry = owner("id") }},
		{caps.ReadWrite, "a write lock", func(r *driver.Request) { r.Kind = driver.Write }},
		{caps.ReadWrite, "a read lock", func(r *driver.Request) { r.Kind = driver.Read }},
		{caps.Semaphore, "a semaphore permit", func(r *driver.Request) { r.Kind, r.Limit = driver.Permit, 2 }},
	} {
		if !u.claimed {
			requests = append(requests, struct {
				what string
				req  driver.Request
				want error
			}{u.what + " (not claimed)", mutex(u.edit), errors.ErrUnsupported})
		}
	}
	for _, r := range requests {
		expectRefusal(t, "Acquire of "+r.what, func(ctx context.Context) (bool, error) {
			g, err := b.Acquire(ctx, r.req)
			return g.Acquired, err
		}, r.want)
	}
	if h.Stored != nil {
		if left := h.Stored(t, free); len(left) > 0 {
			t.Errorf("the refused requests for a free key left %q in the store", left)
		}
	}

	// Leases that name the holding, or nearly.
	for _, l := range []struct {
		what  string
		lease driver.Lease
		want  error
	}{
		{"an empty key", driver.Lease{Owner: held.Owner}, driver.ErrInvalidKey},
		{"a key over MaxKeyLen", driver.Lease{Key: long, Owner: held.Owner}, driver.ErrInvalidKey},
		{"an empty owner", driver.Lease{Key: key}, driver.ErrInvalidRequest},
		{"an owner over MaxOwnerLen", driver.Lease{Key: key, Owner: longOwner}, driver.ErrInvalidRequest},
		{"an unknown kind", driver.Lease{Key: key, Owner: held.Owner, Kind: driver.Permit + 1}, driver.ErrInvalidRequest},
	} {
		expectRefusal(t, "Refresh of a lease with "+l.what, func(ctx context.Context) (bool, error) {
			_, err := b.Refresh(ctx, l.lease, held.TTL)
			return false, err
		}, l.want)
		expectRefusal(t, "Release of a lease with "+l.what, func(ctx context.Context) (bool, error) {
			return false, b.Release(ctx, l.lease)
		}, l.want)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		expectRefusal(t, fmt.Sprintf("Refresh of the holding to %v", ttl), func(ctx context.Context) (bool, error) {
			_, err := b.Refresh(ctx, held.Lease, ttl)
			return false, err
		}, driver.ErrInvalidRequest)
	}

	// Keys given alone. Without Notify, Watch may refuse for that first.
	watchWants := []error{driver.ErrInvalidKey}
	if !caps.Notify {
		watchWants = append(watchWants, errors.ErrUnsupported)
	}
	for _, k := range []struct{ what, key string }{{"an empty key", ""}, {"a key over MaxKeyLen", long}} {
		expectRefusal(t, "Watch of "+k.what, func(ctx context.Context) (bool, error) {
			w, err := b.Watch(ctx, k.key, "")
			if w != nil {
				_ = w.Close()
			}
			return err == nil, err
		}, watchWants...)
		expectRefusal(t, "Inspect of "+k.what, func(ctx context.Context) (bool, error) {
			_, err := b.Inspect(ctx, k.key)
			return false, err
		}, driver.ErrInvalidKey)
		expectRefusal(t, "Break of "+k.what, func(ctx context.Context) (bool, error) {
			_, err := b.Break(ctx, k.key)
			return false, err
		}, driver.ErrInvalidKey)
	}

	ctx := timeout(t, 10*time.Second)
	if info, err := b.Inspect(ctx, key); err != nil || !info.Held {
		t.Errorf("Inspect of the held key after the refusals: %+v, %v; want it held", info, err)
	}
	if _, err := b.Refresh(ctx, held.Lease, held.TTL); err != nil {
		t.Errorf("the holder's Refresh after the refusals: %v; want its lease intact", err)
	}
}

// refusalBound bounds one call of testInvalidRequest: it is given a
// context of refusalBound, and must return within twice that.
const refusalBound = 5 * time.Second

// expectRefusal runs call, which makes one request the contract rules out
// and reports whether it took something (a grant, a watch), and fails t
// unless call returns an error wrapping one of want, took nothing, and
// neither panicked nor outlasted its bound.
func expectRefusal(t testing.TB, what string, call func(ctx context.Context) (took bool, err error), want ...error) {
	t.Helper()
	type outcome struct {
		took     bool
		err      error
		panicked any
	}
	ctx, cancel := context.WithTimeout(context.Background(), refusalBound)
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			o.panicked = recover()
			done <- o
		}()
		o.took, o.err = call(ctx)
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(2 * refusalBound):
		t.Errorf("%s: no answer %v after the call began; want a refusal wrapping %v", what, 2*refusalBound, want)
		return
	}
	switch {
	case o.panicked != nil:
		t.Errorf("%s panicked: %v; want a refusal wrapping %v", what, o.panicked, want)
	case o.took:
		t.Errorf("%s succeeded (error %v); want a refusal wrapping %v", what, o.err, want)
	case !isAnyOf(o.err, want):
		t.Errorf("%s: %v; want an error wrapping %v", what, o.err, want)
	}
}

func isAnyOf(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
