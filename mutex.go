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
	m := &Mutex{}
	c.describeLock(&m.d, key, driver.Exclusive, opts)
	return m
}

// describeLock sets d to describe a lock of kind on key. It fills d in
// place, inside the Mutex, RWMutex or Semaphore that holds it: options are
// handed a pointer into it, which would move a local desc to the heap.
func (c *Client) describeLock(d *desc, key string, kind driver.Kind, opts []Option) {
	*d = desc{c: c, key: key, kind: kind}
	if c != nil {
		d.opts = c.opts
	} else {
		d.opts = defaultOptions() // Lock reports the missing backend
	}
	for _, opt := range opts {
		opt(&d.opts)
	}
	d.obs = d.opts.observer()
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
type Mutex struct{ d desc }

// desc describes a lock: a Mutex, a side of an RWMutex, a Semaphore or an
// Election's mutex. Every kind is taken and held by the same code; what
// tells them apart is here.
type desc struct {
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

// description returns m's description, or nil for a nil m: the request
// check reports it.
func (m *Mutex) description() *desc {
	if m == nil {
		return nil
	}
	return &m.d
}

// Key returns the lock's name.
func (m *Mutex) Key() string { return m.d.key }

// TryLock makes one attempt to take the lock. It returns [ErrNotObtained]
// at once if the lock is held elsewhere. If the backend's reply is lost
// (an error), TryLock releases whatever the attempt may have taken before
// it returns the error, so a failed TryLock never leaves a lock behind
// except for a backend that is unreachable, where the lease expires on its own.
func (m *Mutex) TryLock(ctx context.Context) (*Lock, error) { return m.description().tryLock(ctx) }

// Lock takes the lock, waiting as long as it takes, until ctx is done. It
// never gives up on its own: bound the wait with a ctx deadline. When ctx
// ends first, the error wraps both [ErrNotObtained] and ctx.Err(), and the
// last backend error if there was one.
//
// Backends that can notify a release wake the waiter within about one round
// trip; others are polled with jittered backoff (see [WithBackoff]), never
// sleeping past the holder's remaining lease. Goroutines of one Client that
// wait for the same plain mutex (not fair, not re-entrant) take turns: one
// at a time asks the backend, the others wait in line in the Client, and
// they get the lock in the order they called Lock. A process is then one
// waiter on the backend however many of its goroutines wait, so a release
// wakes one of them rather than all. Backend errors are retried
// with the same owner token, so an attempt whose reply was lost but which
// was applied is recognised as success.
func (m *Mutex) Lock(ctx context.Context) (*Lock, error) { return m.description().lock(ctx) }

// tryLock is [Mutex.TryLock] for a lock of any kind.
func (d *desc) tryLock(ctx context.Context) (*Lock, error) {
	req, err := d.request(ctx)
	if err != nil {
		return nil, err
	}
	cl := d.startCall()
	start := time.Now()
	g, err := d.c.backend.Acquire(ctx, req)
	cl.attempt(ctx, start, g, err)
	switch {
	case refused(err):
		return nil, cl.failed(ctx, d.refusal(err))
	case err != nil:
		d.abandon(ctx, req.Lease, true)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: %w", d.key, err))
	case g.Guarded:
		return nil, cl.failed(ctx, guardError(d.key, g))
	case !g.Acquired:
		return nil, cl.failed(ctx, fmt.Errorf("%w: %q is held elsewhere", ErrNotObtained, d.key))
	}
	return d.newLock(ctx, req.Lease, start, g, false, &cl)
}

// request checks the call and returns its acquisition request, with a
// fresh owner token.
func (d *desc) request(ctx context.Context) (driver.Request, error) {
	if ctx == nil {
		return driver.Request{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if d == nil {
		return driver.Request{}, fmt.Errorf("%w: nil Mutex", ErrInvalidArgument)
	}
	if err := d.c.usable(); err != nil {
		return driver.Request{}, err
	}
	caps := d.c.caps
	switch {
	case d.opts.fair && (!caps.Fair || d.kind != driver.Exclusive):
		return driver.Request{}, d.unsupported("fair")
	case d.kind == driver.Permit && !caps.Semaphore,
		(d.kind == driver.Write || d.kind == driver.Read) && !caps.ReadWrite:
		return driver.Request{}, d.unsupported("")
	}
	if err := d.opts.validate(d.key); err != nil {
		return driver.Request{}, err
	}
	id := d.opts.owner
	if d.single && !id.IsZero() {
		return driver.Request{}, fmt.Errorf("%w: an election %q takes no owner identity: two candidates sharing one would lead at once", ErrInvalidArgument, d.key)
	}
	if id.IsZero() && d.kind == driver.Exclusive && !d.single {
		var given bool
		if id, given = OwnerFromContext(ctx); given && id.IsZero() {
			return driver.Request{}, fmt.Errorf("%w: the context carries a zero OwnerID", ErrInvalidArgument)
		}
	}
	var reentry string
	if !id.IsZero() {
		if d.kind != driver.Exclusive || !caps.Reentrant {
			return driver.Request{}, d.unsupported("re-entrant")
		}
		reentry = id.digest()
	}
	return driver.Request{
		Lease:   driver.Lease{Key: d.key, Owner: newOwner(), Kind: d.kind},
		TTL:     d.opts.ttl,
		Limit:   d.limit,
		Meta:    d.opts.meta,
		Fair:    d.opts.fair,
		Reentry: reentry,
	}, nil
}

// unsupported is the error for a lock the backend (or the kind) does not
// offer; adjective qualifies it ("fair", "re-entrant").
func (d *desc) unsupported(adjective string) error {
	what := "lock"
	switch d.kind {
	case driver.Write, driver.Read:
		what = "read-write lock"
	case driver.Permit:
		what = "semaphore"
	}
	if adjective != "" && d.kind != driver.Exclusive {
		// Whatever the backend offers, only a mutex can be fair or
		// re-entrant: say so, not that the backend lacks it.
		option := map[string]string{"fair": "WithFairness", "re-entrant": "an owner identity (WithOwner)"}[adjective]
		return fmt.Errorf("distlock: %s %q given %s: only a mutex can be %s: %w", what, d.key, option, adjective, errors.ErrUnsupported)
	}
	if adjective != "" {
		what = adjective + " " + what
	}
	return fmt.Errorf("distlock: %s %q: %w by this backend", what, d.key, errors.ErrUnsupported)
}

// newLock returns the handle of grant g, made by the call cl. ambiguous
// reports that an earlier attempt of the same owner had an unknown outcome
// (see Lock.floor).
func (d *desc) newLock(ctx context.Context, l driver.Lease, start time.Time, g driver.Grant, ambiguous bool, cl *call) (*Lock, error) {
	if g.ValidFor <= 0 {
		// A grant that is already worthless is a backend bug or a clock
		// problem; holding it would break mutual exclusion.
		d.abandon(context.Background(), l, false)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: backend granted a lease with no validity (%v)", d.key, g.ValidFor))
	}
	if took := time.Since(start); took >= g.ValidFor {
		// The lease's validity ran out before its reply arrived: the
		// lock may be someone else's by now. The TTL is too short for
		// the round trips the backend needs.
		d.abandon(context.Background(), l, false)
		return nil, cl.failed(ctx, fmt.Errorf("distlock: acquire %q: the grant's validity of %v ran out before its reply arrived, %v after the attempt began (a longer TTL is needed): %w: %w",
			d.key, g.ValidFor, took.Round(time.Microsecond), ErrNotObtained, ErrLockExpired))
	}
	if lk := startLock(ctx, d, l, start, g, ambiguous, cl); lk != nil {
		return lk, nil
	}
	d.abandon(context.Background(), l, false)
	return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, d.key, ErrClientClosed))
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
	return errors.Is(err, driver.ErrInvalidKey) || errors.Is(err, driver.ErrInvalidRequest) ||
		errors.Is(err, errors.ErrUnsupported) || errors.Is(err, driver.ErrTTLTooLong) ||
		errors.Is(err, driver.ErrInvalidBackend) || errors.Is(err, driver.ErrKindMismatch)
}

// refusal is the error of Lock and TryLock for a request the backend
// refused.
func (d *desc) refusal(err error) error {
	if errors.Is(err, driver.ErrInvalidKey) {
		return fmt.Errorf("%w: %q: %w", ErrInvalidKey, d.key, err)
	}
	if errors.Is(err, driver.ErrKindMismatch) { // the error names the key and both kinds
		return fmt.Errorf("%w: %w", ErrNotObtained, err)
	}
	if longTTLRefused(err, d.opts.ttl) {
		return fmt.Errorf("%w: acquire %q with TTL %v: %w; %s", ErrInvalidTTL, d.key, d.opts.ttl, err, longTTLAdvice)
	}
	if errors.Is(err, driver.ErrInvalidRequest) { // a backend with narrower limits than the contract's
		return fmt.Errorf("%w: acquire %q: %w", ErrInvalidArgument, d.key, err)
	}
	return fmt.Errorf("distlock: acquire %q: %w", d.key, err)
}

// longTTLRefused reports whether err is a backend's refusal of a TTL
// longer than its maximum lease: a [driver.TTLTooLongError], or, from a
// backend that predates it, an unsupported request whose TTL is above
// [DefaultTTL], which every backend accepts (the kinds of lock a backend
// lacks are refused before it is asked).
func longTTLRefused(err error, ttl time.Duration) bool {
	return errors.Is(err, driver.ErrTTLTooLong) || ttl > DefaultTTL && errors.Is(err, errors.ErrUnsupported)
}

// longTTLAdvice follows the refusal of a long TTL: what to do instead.
const longTTLAdvice = "a lock held for longer needs no long TTL: the watchdog renews the lease while the lock is held (unless WithoutAutoRefresh), " +
	"so keep the TTL short (the default is 30s) and it only bounds how long a crashed holder keeps the key; " +
	"or raise the backend's maximum lease on every client (its WithMaxTTL option, or max_ttl in a URL)"

// guardError is the error of an attempt that the restart guard refused.
func guardError(key string, g driver.Grant) error {
	return fmt.Errorf("%w: %q is refused for up to %v more because the store may have lost data; if its servers lost nothing (new, or persisting every write), Client.DeclareFresh ends the wait, and servers that persist every write can say so once (redislock.WithDurableServers, restart_guard=durable in a URL)",
		ErrRestartGuard, key, g.RetryAfter.Round(time.Second))
}

// isNotHeld reports whether a backend says the owner no longer holds the key.
func isNotHeld(err error) bool { return errors.Is(err, driver.ErrNotHeld) }
