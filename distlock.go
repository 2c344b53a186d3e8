package distlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Client takes locks from one backend. It is safe for concurrent use and
// cheap to share: create one per backend and keep it.
type Client struct {
	backend driver.Backend
	caps    driver.Capabilities
	waiter  driver.Waiter    // nil when the backend cannot notify
	queuer  driver.Queuer    // nil when the backend cannot queue fairly
	sem     driver.Semaphore // nil when the backend has no semaphores
	rw      driver.RWLocker  // nil when the backend has no read-write locks
	opts    options
	owned   bool  // made by Open: Close closes the backend
	invalid error // why the client cannot take locks (a nil backend), or nil
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
		if w, ok := backend.(driver.Waiter); ok && c.caps.NotifiedWait {
			c.waiter = w
		}
		if q, ok := backend.(driver.Queuer); ok && c.caps.Fair {
			c.queuer = q
		}
		if sem, ok := backend.(driver.Semaphore); ok && c.caps.Semaphore {
			c.sem = sem
		}
		if rw, ok := backend.(driver.RWLocker); ok && c.caps.ReadWrite {
			c.rw = rw
		}
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

// Mutex returns a mutual-exclusion lock named key. The Mutex is only a
// description: it holds nothing until [Mutex.Lock] or [Mutex.TryLock]
// returns a [*Lock], and it may be used by many goroutines at once, each
// getting its own handle. Invalid keys and options are reported by Lock and
// TryLock.
func (c *Client) Mutex(key string, opts ...Option) *Mutex {
	m := &Mutex{c: c, key: key}
	if c != nil {
		m.opts = c.opts
	} else {
		m.opts = defaultOptions() // Lock reports the missing backend
	}
	for _, opt := range opts {
		opt(&m.opts)
	}
	return m
}

// Mutex is a distributed mutual-exclusion lock on one key.
//
// Holding it is a lease, not a guarantee: a process pause, a network
// partition or a server failover can end the lease while the holder still
// runs. It is NOT safe to assume the lock is held until Unlock returns.
// Watch [Lock.Done] (or run the work under [Lock.Context]) and pass
// [Lock.Token] to every resource you write, so that it can reject a holder
// whose lease has ended (see package fence).
type Mutex struct {
	c       *Client
	key     string
	opts    options
	permits int  // > 0: a semaphore with this many permits (see Semaphore)
	rw      rank // the side of a read-write lock, or none
}

// rank is the side of a read-write lock a Mutex takes.
type rank uint8

const (
	plain  rank = iota // a mutex
	writer             // RWMutex.Lock
	reader             // RWMutex.RLock
)

// Key returns the lock's name.
func (m *Mutex) Key() string { return m.key }

// TryLock makes one attempt to take the lock. It returns [ErrNotObtained]
// at once if the lock is held elsewhere. If the backend's reply is lost
// (an error), TryLock releases whatever the attempt may have taken before
// it returns the error, so a failed TryLock never leaves a lock behind
// except for a backend that is unreachable, where the lease expires on its own.
func (m *Mutex) TryLock(ctx context.Context) (*Lock, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	owner := newOwner()
	start := time.Now()
	g, err := m.acquire(ctx, m.request(owner))
	if err != nil {
		m.abandon(ctx, owner)
		return nil, fmt.Errorf("distlock: acquire %q: %w", m.key, err)
	}
	if !g.Acquired {
		return nil, ErrNotObtained
	}
	return m.newLock(owner, start, g, false)
}

// Lock takes the lock, waiting as long as it takes, until ctx is done. It
// never gives up on its own: bound the wait with a ctx deadline. When ctx
// ends first, the error wraps both [ErrNotObtained] and ctx.Err(), and the
// last backend error if there was one.
//
// Backends that can notify a release (driver.Waiter) wake the waiter within
// about one round trip; others are polled with jittered backoff (see
// [WithBackoff]), never sleeping past the holder's remaining lease. Backend
// errors are retried with the same owner token, so an attempt whose reply
// was lost but which was applied is recognised as success.
func (m *Mutex) Lock(ctx context.Context) (*Lock, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	owner := newOwner()
	req := m.request(owner)
	if req.Fair || m.rw == writer {
		// A queued waiter (a fair one, or a writer holding readers off)
		// renews its place with every attempt; the place outlives a few
		// missed attempts, not a vanished waiter for long.
		req.Queue = 2*m.opts.safetyPoll + time.Second
	}
	var (
		watch     driver.Watch
		lastErr   error
		ambiguous bool // an attempt's outcome is unknown
		timer     *time.Timer
		backoffN  int
	)
	defer func() {
		if watch != nil {
			watch.Close()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		start := time.Now()
		g, err := m.acquire(ctx, req)
		if err == nil && g.Acquired {
			return m.newLock(owner, start, g, ambiguous)
		}
		var delay time.Duration
		switch {
		case err != nil:
			lastErr, ambiguous = err, true
			backoffN++
			delay = m.opts.backoff.Next(backoffN)
		case watch == nil && m.c.waiter != nil:
			// Subscribe on first contention, then re-try at once: a
			// release between the attempt and the subscription is
			// caught by that re-try, and every later one by the watch.
			var (
				w    driver.Watch
				werr error
			)
			if tw, ok := m.c.waiter.(driver.TurnWaiter); ok && req.Fair {
				w, werr = tw.WatchTurn(ctx, m.key, owner)
			} else {
				w, werr = m.c.waiter.Watch(ctx, m.key)
			}
			if werr == nil {
				watch = w
				continue
			}
			lastErr = werr
			backoffN++
			delay = m.opts.backoff.Next(backoffN)
		case watch != nil:
			delay = m.opts.safetyPoll
		default:
			backoffN++
			delay = m.opts.backoff.Next(backoffN)
		}
		if err == nil && g.RetryAfter > 0 && delay > g.RetryAfter {
			delay = g.RetryAfter
		}
		if req.Queue > 0 && delay > req.Queue/3 {
			delay = req.Queue / 3
		}
		if ctx.Err() == nil {
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
			var notified <-chan struct{}
			if watch != nil {
				notified = watch.C()
			}
			select {
			case <-timer.C:
				continue
			case <-notified:
				continue
			case <-ctx.Done():
			}
		}
		switch {
		case req.Fair:
			m.leave(ctx, owner)
		case ambiguous, m.rw == writer: // a writer also withdraws its announcement
			m.abandon(ctx, owner)
		}
		if lastErr != nil {
			return nil, fmt.Errorf("%w: %q: %w (last error: %w)", ErrNotObtained, m.key, ctx.Err(), lastErr)
		}
		return nil, fmt.Errorf("%w: %q: %w", ErrNotObtained, m.key, ctx.Err())
	}
}

func (m *Mutex) check(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if m == nil {
		return fmt.Errorf("%w: nil Mutex", ErrInvalidArgument)
	}
	if m.c == nil {
		return fmt.Errorf("%w: nil Client", ErrInvalidBackend)
	}
	if m.c.invalid != nil {
		return m.c.invalid
	}
	if m.opts.fair && (m.c.queuer == nil || m.permits > 0 || m.rw != plain) {
		return fmt.Errorf("distlock: fair lock %q: %w by this backend", m.key, errors.ErrUnsupported)
	}
	if m.permits > 0 && m.c.sem == nil {
		return fmt.Errorf("distlock: semaphore %q: %w by this backend", m.key, errors.ErrUnsupported)
	}
	if m.rw != plain && m.c.rw == nil {
		return fmt.Errorf("distlock: read-write lock %q: %w by this backend", m.key, errors.ErrUnsupported)
	}
	return m.opts.validate(m.key)
}

func (m *Mutex) request(owner string) driver.AcquireRequest {
	return driver.AcquireRequest{Key: m.key, Owner: owner, TTL: m.opts.ttl, Meta: m.opts.meta, Fair: m.opts.fair}
}

// abandon releases what an attempt with an unknown outcome may have taken.
// It is detached from ctx, which is usually what ended the attempt.
func (m *Mutex) abandon(ctx context.Context, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.releaseTimeout)
	defer cancel()
	_ = m.release(rctx, owner) // best effort: the lease expires anyway
}

// leave gives up a fair waiter's place in the queue (and a grant that
// raced with giving up), detached from ctx like abandon.
func (m *Mutex) leave(ctx context.Context, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.releaseTimeout)
	defer cancel()
	_ = m.c.queuer.Leave(rctx, m.key, owner)
}

// newLock returns the handle of grant g. ambiguous reports that an earlier
// attempt of the same owner had an unknown outcome (see Lock.floor).
func (m *Mutex) newLock(owner string, start time.Time, g driver.Grant, ambiguous bool) (*Lock, error) {
	if g.ValidFor <= 0 {
		// A grant that is already worthless is a backend bug or a clock
		// problem; holding it would break mutual exclusion.
		m.abandon(context.Background(), owner)
		return nil, fmt.Errorf("distlock: acquire %q: backend granted a lease with no validity (%v)", m.key, g.ValidFor)
	}
	return startLock(m, owner, start, g, ambiguous), nil
}

// newOwner returns 128 random bits, hex encoded. crypto/rand never fails
// on supported platforms.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// acquire, release and refresh act on the mutex's lock, or on one permit
// of its semaphore.
func (m *Mutex) acquire(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	switch {
	case m.permits > 0:
		return m.c.sem.AcquirePermit(ctx, req, m.permits)
	case m.rw == writer:
		return m.c.rw.AcquireExclusive(ctx, req)
	case m.rw == reader:
		return m.c.rw.AcquireShared(ctx, req)
	}
	return m.c.backend.Acquire(ctx, req)
}

func (m *Mutex) release(ctx context.Context, owner string) error {
	switch {
	case m.permits > 0:
		return m.c.sem.ReleasePermit(ctx, m.key, owner)
	case m.rw == reader:
		return m.c.rw.ReleaseShared(ctx, m.key, owner)
	}
	return m.c.backend.Release(ctx, m.key, owner)
}

func (m *Mutex) refresh(ctx context.Context, owner string, ttl time.Duration) (time.Duration, error) {
	switch {
	case m.permits > 0:
		return m.c.sem.RefreshPermit(ctx, m.key, owner, ttl)
	case m.rw == reader:
		return m.c.rw.RefreshShared(ctx, m.key, owner, ttl)
	}
	return m.c.backend.Refresh(ctx, m.key, owner, ttl)
}

// isNotHeld reports whether a backend says the owner no longer holds the key.
func isNotHeld(err error) bool { return errors.Is(err, driver.ErrNotHeld) }
