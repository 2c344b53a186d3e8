package distlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Mutex returns a mutual-exclusion lock named key. The Mutex is only a
// description: it holds nothing until [Mutex.Lock] or [Mutex.TryLock]
// returns a [*Lock], and it may be used by many goroutines at once, each
// getting its own handle. Invalid keys and options are reported by Lock and
// TryLock.
func (c *Client) Mutex(key string, opts ...Option) *Mutex {
	return c.lock(key, driver.Exclusive, opts)
}

// lock returns the description of a lock of kind on key.
func (c *Client) lock(key string, kind driver.Kind, opts []Option) *Mutex {
	m := &Mutex{c: c, key: key, kind: kind}
	if c != nil {
		m.opts = c.opts
	} else {
		m.opts = defaultOptions() // Lock reports the missing backend
	}
	for _, opt := range opts {
		opt(&m.opts)
	}
	m.obs = m.opts.observer()
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
//
// A Mutex is re-entrant for an owner identity given with [WithOwner] or
// carried by the context ([ContextWithOwner]); see [OwnerID].
type Mutex struct {
	c     *Client
	key   string
	opts  options
	kind  driver.Kind // what each holding takes: a mutex, a side of a read-write lock, a permit
	limit int         // the semaphore's size, with driver.Permit
	obs   Observer    // nil: not observed

	// single refuses re-entrance: an election's mutex, which two holders
	// sharing an identity must never hold at once.
	single bool
}

// Key returns the lock's name.
func (m *Mutex) Key() string { return m.key }

// TryLock makes one attempt to take the lock. It returns [ErrNotObtained]
// at once if the lock is held elsewhere. If the backend's reply is lost
// (an error), TryLock releases whatever the attempt may have taken before
// it returns the error, so a failed TryLock never leaves a lock behind
// except for a backend that is unreachable, where the lease expires on its own.
func (m *Mutex) TryLock(ctx context.Context) (*Lock, error) {
	req, err := m.request(ctx)
	if err != nil {
		return nil, err
	}
	cl := m.startCall()
	start := time.Now()
	g, err := m.c.backend.Acquire(ctx, req)
	cl.attempt(ctx, start, g, err)
	switch {
	case refused(err):
		return nil, cl.failed(ctx, m.refusal(err))
	case err != nil:
		m.abandon(ctx, req.Lease, true)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: %w", m.key, err))
	case g.Guarded:
		return nil, cl.failed(ctx, guardError(m.key, g))
	case !g.Acquired:
		return nil, cl.failed(ctx, fmt.Errorf("%w: %q is held elsewhere", ErrNotObtained, m.key))
	}
	return m.newLock(ctx, req.Lease, start, g, false, &cl)
}

// request checks the call and returns its acquisition request, with a
// fresh owner token.
func (m *Mutex) request(ctx context.Context) (driver.Request, error) {
	if ctx == nil {
		return driver.Request{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if m == nil {
		return driver.Request{}, fmt.Errorf("%w: nil Mutex", ErrInvalidArgument)
	}
	if err := m.c.usable(); err != nil {
		return driver.Request{}, err
	}
	caps := m.c.caps
	switch {
	case m.opts.fair && (!caps.Fair || m.kind != driver.Exclusive):
		return driver.Request{}, m.unsupported("fair")
	case m.kind == driver.Permit && !caps.Semaphore,
		(m.kind == driver.Write || m.kind == driver.Read) && !caps.ReadWrite:
		return driver.Request{}, m.unsupported("")
	}
	if err := m.opts.validate(m.key); err != nil {
		return driver.Request{}, err
	}
	id := m.opts.owner
	if m.single && !id.IsZero() {
		return driver.Request{}, fmt.Errorf("%w: an election %q takes no owner identity: two candidates sharing one would lead at once", ErrInvalidArgument, m.key)
	}
	if id.IsZero() && m.kind == driver.Exclusive && !m.single {
		var given bool
		if id, given = OwnerFromContext(ctx); given && id.IsZero() {
			return driver.Request{}, fmt.Errorf("%w: the context carries a zero OwnerID", ErrInvalidArgument)
		}
	}
	var reentry string
	if !id.IsZero() {
		if m.kind != driver.Exclusive || !caps.Reentrant {
			return driver.Request{}, m.unsupported("re-entrant")
		}
		reentry = id.digest()
	}
	return driver.Request{
		Lease:   driver.Lease{Key: m.key, Owner: newOwner(), Kind: m.kind},
		TTL:     m.opts.ttl,
		Limit:   m.limit,
		Meta:    m.opts.meta,
		Fair:    m.opts.fair,
		Reentry: reentry,
	}, nil
}

// unsupported is the error for a lock the backend (or the kind) does not
// offer; adjective qualifies it ("fair", "re-entrant").
func (m *Mutex) unsupported(adjective string) error {
	what := "lock"
	switch m.kind {
	case driver.Write, driver.Read:
		what = "read-write lock"
	case driver.Permit:
		what = "semaphore"
	}
	if adjective != "" && m.kind != driver.Exclusive {
		// Whatever the backend offers, only a mutex can be fair or
		// re-entrant: say so, not that the backend lacks it.
		option := map[string]string{"fair": "WithFairness", "re-entrant": "an owner identity (WithOwner)"}[adjective]
		return fmt.Errorf("distlock: %s %q given %s: only a mutex can be %s: %w", what, m.key, option, adjective, errors.ErrUnsupported)
	}
	if adjective != "" {
		what = adjective + " " + what
	}
	return fmt.Errorf("distlock: %s %q: %w by this backend", what, m.key, errors.ErrUnsupported)
}

// newLock returns the handle of grant g, made by the call cl. ambiguous
// reports that an earlier attempt of the same owner had an unknown outcome
// (see Lock.floor).
func (m *Mutex) newLock(ctx context.Context, l driver.Lease, start time.Time, g driver.Grant, ambiguous bool, cl *call) (*Lock, error) {
	if g.ValidFor <= 0 {
		// A grant that is already worthless is a backend bug or a clock
		// problem; holding it would break mutual exclusion.
		m.abandon(context.Background(), l, false)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: backend granted a lease with no validity (%v)", m.key, g.ValidFor))
	}
	if took := time.Since(start); took >= g.ValidFor {
		// The lease's validity ran out before its reply arrived: the
		// lock may be someone else's by now. The TTL is too short for
		// the round trips the backend needs.
		m.abandon(context.Background(), l, false)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: the grant's validity of %v ran out before its reply arrived, %v after the attempt began (a longer TTL is needed): %w: %w",
			m.key, g.ValidFor, took.Round(time.Microsecond), ErrNotObtained, ErrLockExpired))
	}
	if lk := startLock(ctx, m, l, start, g, ambiguous, cl); lk != nil {
		return lk, nil
	}
	m.abandon(context.Background(), l, false)
	return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, m.key, ErrClientClosed))
}

// newOwner returns 128 random bits, hex encoded. crypto/rand never fails
// on supported platforms.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// refused reports whether the backend refused a request outright (a key
// it cannot store, a kind it does not offer, a backend set up wrongly):
// retrying cannot help, and nothing was taken.
func refused(err error) bool {
	return errors.Is(err, driver.ErrInvalidKey) || errors.Is(err, errors.ErrUnsupported) ||
		errors.Is(err, ErrInvalidBackend) || errors.Is(err, driver.ErrKindMismatch)
}

// refusal is the error of Lock and TryLock for a request the backend
// refused.
func (m *Mutex) refusal(err error) error {
	if errors.Is(err, driver.ErrInvalidKey) {
		return fmt.Errorf("%w: %q: %w", ErrInvalidKey, m.key, err)
	}
	if errors.Is(err, driver.ErrKindMismatch) { // the error names the key and both kinds
		return fmt.Errorf("%w: %w", ErrNotObtained, err)
	}
	if longTTLRefused(err, m.opts.ttl) {
		return fmt.Errorf("%w: acquire %q with TTL %v: %w; %s", ErrInvalidTTL, m.key, m.opts.ttl, err, longTTLAdvice)
	}
	return fmt.Errorf("distlock: acquire %q: %w", m.key, err)
}

// longTTLRefused reports whether err is a backend's refusal of a TTL
// longer than its maximum lease (the Redis backends' restart guard): an
// unsupported request whose TTL is above [DefaultTTL], which every
// backend accepts. The kinds of lock a backend lacks are refused before
// it is asked.
func longTTLRefused(err error, ttl time.Duration) bool {
	return ttl > DefaultTTL && errors.Is(err, errors.ErrUnsupported)
}

// longTTLAdvice follows the refusal of a long TTL: what to do instead.
const longTTLAdvice = "a lock held for longer needs no long TTL: the watchdog renews the lease while the lock is held (unless WithoutAutoRefresh), " +
	"so keep the TTL short (the default is 30s) and it only bounds how long a crashed holder keeps the key; " +
	"or raise the backend's maximum lease on every client (redislock.WithMaxTTL, redlock.WithMaxTTL, max_ttl in a URL)"

// guardError is the error of an attempt that the restart guard refused.
func guardError(key string, g driver.Grant) error {
	return fmt.Errorf("%w: %q is refused for up to %v more because the store may have lost data; if its servers lost nothing (new, or persisting every write), Client.DeclareFresh ends the wait",
		ErrRestartGuard, key, g.RetryAfter.Round(time.Second))
}

// isNotHeld reports whether a backend says the owner no longer holds the key.
func isNotHeld(err error) bool { return errors.Is(err, driver.ErrNotHeld) }
