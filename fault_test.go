package distlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// fault wraps a backend, memlock in most tests, and hands each call to the
// hook of its method, if set: the hook decides whether, when and how the
// call reaches the backend (next) and what its caller hears, as a network
// or a server under test would. Methods without a hook reach the backend
// unchanged. It is the one fault injector of the root package's tests; a
// test keeps the state its hooks share in its own variables.
type fault struct {
	driver.Backend
	acquire func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error)
	refresh func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error)
	release func(ctx context.Context, l driver.Lease, next releaseFunc) error
	watch   func(ctx context.Context, key, turn string, next watchFunc) (driver.Watch, error)
	caps    *driver.Capabilities // what the backend says it offers, if set
}

type (
	acquireFunc = func(context.Context, driver.Request) (driver.Grant, error)
	refreshFunc = func(context.Context, driver.Lease, time.Duration) (time.Duration, error)
	releaseFunc = func(context.Context, driver.Lease) error
	watchFunc   = func(context.Context, string, string) (driver.Watch, error)
)

// memFault returns a fault wrapping a fresh memlock backend, without hooks.
func memFault() *fault { return &fault{Backend: memlock.New()} }

func (f *fault) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if f.acquire == nil {
		return f.Backend.Acquire(ctx, req)
	}
	return f.acquire(ctx, req, f.Backend.Acquire)
}

func (f *fault) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if f.refresh == nil {
		return f.Backend.Refresh(ctx, l, ttl)
	}
	return f.refresh(ctx, l, ttl, f.Backend.Refresh)
}

func (f *fault) Release(ctx context.Context, l driver.Lease) error {
	if f.release == nil {
		return f.Backend.Release(ctx, l)
	}
	return f.release(ctx, l, f.Backend.Release)
}

func (f *fault) Watch(ctx context.Context, key, turn string) (driver.Watch, error) {
	if f.watch == nil {
		return f.Backend.Watch(ctx, key, turn)
	}
	return f.watch(ctx, key, turn, f.Backend.Watch)
}

func (f *fault) Capabilities() driver.Capabilities {
	if f.caps != nil {
		return *f.caps
	}
	return f.Backend.Capabilities()
}

// firstN returns a function that reports true for its first n calls, from
// any goroutine, and false afterwards.
func firstN(n int32) func() bool {
	var calls atomic.Int32
	return func() bool { return calls.Add(1) <= n }
}

// failAcquires is an acquire hook whose first n attempts fail with err;
// applied ones reach the store first, as when the reply is lost, the
// others never arrive.
func failAcquires(n int32, applied bool, err error) func(context.Context, driver.Request, acquireFunc) (driver.Grant, error) {
	fail := firstN(n)
	return func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		if !fail() {
			return next(ctx, req)
		}
		if applied {
			_, _ = next(ctx, req)
		}
		return driver.Grant{}, err
	}
}

// failRefreshes is a refresh hook whose first n renewals fail with err
// without reaching the store.
func failRefreshes(n int32, err error) func(context.Context, driver.Lease, time.Duration, refreshFunc) (time.Duration, error) {
	fail := firstN(n)
	return func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
		if fail() {
			return 0, err
		}
		return next(ctx, l, ttl)
	}
}

// hangRelease is a release hook that never reaches the store: the release
// hangs until its context ends, as one sent to a paused server does.
func hangRelease(ctx context.Context, _ driver.Lease, _ releaseFunc) error {
	<-ctx.Done()
	return ctx.Err()
}

// errInjected is the error of an injected failure.
var errInjected = errors.New("injected fault")

// plainMem returns memlock hiding its capabilities: a backend of plain
// mutexes, neither fair, re-entrant, read-write nor counting.
func plainMem() *fault { return &fault{Backend: memlock.New(), caps: &driver.Capabilities{}} }
