package distlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/distlock-go/distlock/driver"
)

// Client takes locks from one backend. It is safe for concurrent use and
// cheap to share: create one per backend and keep it.
type Client struct {
	backend driver.Backend
	caps    driver.Capabilities
	name    string // the backend's package name, for events
	opts    options
	owned   bool    // made by Open: Close closes the backend
	invalid error   // why the client cannot take locks (a nil backend), or nil
	lines   lines   // plain mutexes' local turns (see line.go)
	held    heldSet // the leases it holds, for Close
}

// New returns a Client that takes locks from backend. The options are the
// defaults for every [Mutex] of the client. A nil backend, also a typed nil
// such as (*memlock.Backend)(nil), does not panic: the client's locks fail
// with [ErrInvalidBackend].
func New(backend driver.Backend, opts ...Option) *Client {
	c := &Client{opts: defaultOptions()}
	switch {
	case backend == nil:
		c.invalid = fmt.Errorf("%w: nil backend", ErrInvalidBackend)
	case isNil(backend): // its methods would likely panic: do not call them
		c.invalid = fmt.Errorf("%w: nil %T", ErrInvalidBackend, backend)
	default:
		c.backend = backend
		c.caps = backend.Capabilities()
		c.name = backendName(backend)
	}
	for _, opt := range opts {
		opt(&c.opts)
	}
	return c
}

// isNil reports whether b holds a nil pointer (or map, func, chan, slice).
func isNil(b driver.Backend) bool {
	switch v := reflect.ValueOf(b); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// usable returns why c cannot take locks, or nil.
func (c *Client) usable() error {
	if c == nil {
		return fmt.Errorf("%w: nil Client", ErrInvalidBackend)
	}
	if c.held.isClosed() {
		return ErrClientClosed
	}
	return c.invalid
}

// Close releases every lock the client still holds and stops their
// renewal, ends the Lock calls still waiting (their errors wrap
// [ErrClientClosed]), and from then on the client takes no locks. A
// client made by [Open] then closes its backend and the connections the
// backend opened. A client made with [New] leaves the backend, and the
// database or server client it was given, to the caller, who may share
// them with other clients: close them after the client. Close returns the
// errors of the releases that failed (a lock lost before Close is one);
// calling it again does nothing.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	locks, first := c.held.close()
	if !first {
		return nil
	}
	errs := make([]error, len(locks))
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Go(func() {
			if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, ErrLockReleased) {
				errs[i] = fmt.Errorf("distlock: close: %q: %w", l.Key(), err)
			}
		})
	}
	wg.Wait()
	if c.owned && c.backend != nil {
		errs = append(errs, c.backend.Close())
	}
	return errors.Join(errs...)
}

// Backend returns the backend the client takes locks from, for wrappers and
// tests; application code does not need it.
func (c *Client) Backend() driver.Backend { return c.backend }

// DeclareFresh tells the backend's restart guard that its servers have
// lost no data since they last started (see redislock's and redlock's
// DeclareFresh for when that is safe), so that it grants locks at once
// instead of waiting out the longest lease a lost holder could still
// have. Backends without a restart guard have nothing to declare: it
// returns nil for them.
func (c *Client) DeclareFresh(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return err
	}
	if d, ok := c.backend.(driver.FreshDeclarer); ok {
		return d.DeclareFresh(ctx)
	}
	return nil
}
