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
func (m *Mutex) Lock(ctx context.Context) (_ *Lock, lockErr error) {
	req, err := m.request(ctx)
	if err != nil {
		return nil, err
	}
	if req.Fair || req.Kind == driver.Write {
		// A waiter in line (a fair one, or a writer holding readers off)
		// renews its place with every attempt; the place outlives a few
		// missed attempts, not a vanished waiter for long.
		req.Queue = 2*m.opts.safetyPoll + time.Second
	}
	cl := m.startCall()
	if inLine(req) {
		l, err := m.c.lines.enter(ctx, m.key)
		if err != nil {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, m.key, err))
		}
		defer m.c.lines.leave(m.key, l)
	}
	w := wait{m: m, req: req}
	defer w.stop()
	bound := false
	for {
		start := time.Now()
		g, err := m.c.backend.Acquire(ctx, req)
		cl.attempt(ctx, start, g, err)
		switch {
		case refused(err):
			if req.Queue > 0 || w.ambiguous {
				m.abandon(ctx, req.Lease, w.ambiguous) // as when giving up below
			}
			return nil, cl.failed(ctx, m.refusal(err))
		case err == nil && g.Acquired:
			if m.opts.autoRefresh || !shortGrant(g, req.TTL) {
				return m.newLock(ctx, req.Lease, start, g, w.ambiguous, &cl)
			}
			// Nothing will renew the short lease: ask once more, which
			// extends the holding to the TTL. If that fails, the short
			// lease is still the caller's.
			again := time.Now()
			g2, err2 := m.c.backend.Acquire(ctx, req)
			cl.attempt(ctx, again, g2, err2)
			switch {
			case err2 != nil:
				return m.newLock(ctx, req.Lease, start, g, w.ambiguous, &cl)
			case g2.Acquired:
				return m.newLock(ctx, req.Lease, again, g2, w.ambiguous, &cl)
			}
			g = g2 // gone meanwhile: wait again
		}
		if !bound {
			// About to wait: Close of the client ends the wait. The
			// first attempt, most often the only one, costs nothing.
			var stop func()
			ctx, stop = m.c.held.bind(ctx)
			defer stop()
			defer func() { lockErr = closedErr(ctx, lockErr) }()
			bound = true
		}
		if w.sleep(ctx, g, err) {
			continue
		}
		if req.Queue > 0 || w.ambiguous {
			// Leave the line, withdraw a writer's claim, and give back a
			// grant that a lost reply may have made.
			m.abandon(ctx, req.Lease, w.ambiguous)
		}
		if w.lastErr != nil {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w (last error: %w)", ErrNotObtained, m.key, ctx.Err(), w.lastErr))
		}
		if g.Guarded {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %w", guardError(m.key, g), ctx.Err()))
		}
		return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, m.key, ctx.Err()))
	}
}

// wait is the state of one waiting Lock between its attempts.
type wait struct {
	m         *Mutex
	req       driver.Request
	watch     driver.Watch // nil until the first contention, or without Notify
	lastErr   error
	ambiguous bool // an attempt's outcome is unknown
	timer     *time.Timer
	backoffN  int
}

// sleep waits after an attempt that returned g and err, until the next
// attempt is due or a release is notified. It reports false when ctx ended.
func (w *wait) sleep(ctx context.Context, g driver.Grant, err error) bool {
	opts := &w.m.opts
	var delay time.Duration
	switch {
	case err != nil:
		w.ambiguous = true
		w.noteErr(ctx, err)
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	case w.watch == nil && w.m.c.caps.Notify:
		// Subscribe on first contention, then retry at once: a release
		// between the attempt and the subscription is caught by that
		// retry, and every later one by the watch.
		turn := ""
		if w.req.Fair {
			turn = w.req.Owner // wake only when it is this waiter's turn
		}
		watch, werr := w.m.c.backend.Watch(ctx, w.m.key, turn)
		if werr == nil {
			w.watch = watch
			return true
		}
		w.noteErr(ctx, werr)
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	case w.watch != nil:
		delay = opts.safetyPoll
	default:
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	}
	if err == nil && g.RetryAfter > 0 && delay > g.RetryAfter {
		delay = g.RetryAfter
	}
	if w.req.Queue > 0 && delay > w.req.Queue/3 {
		delay = w.req.Queue / 3
	}
	if ctx.Err() != nil {
		return false
	}
	if w.timer == nil {
		w.timer = time.NewTimer(delay)
	} else {
		w.timer.Reset(delay)
	}
	var notified <-chan struct{}
	if w.watch != nil {
		notified = w.watch.C()
	}
	select {
	case <-w.timer.C:
		return true
	case <-notified:
		return true
	case <-ctx.Done():
		return false
	}
}

// noteErr remembers err as the wait's last error, unless it only says that
// ctx ended and an earlier error says more (a refused connection, say).
func (w *wait) noteErr(ctx context.Context, err error) {
	if w.lastErr != nil && ctx.Err() != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	w.lastErr = err
}

// stop frees the wait's watch and timer.
func (w *wait) stop() {
	if w.watch != nil {
		w.watch.Close()
	}
	if w.timer != nil {
		w.timer.Stop()
	}
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

// abandon releases what an attempt with an unknown outcome may have taken,
// and leaves the key's queue, detached from ctx, which is usually what
// ended the attempt. It waits for one release, so that a waiter that gave
// up has left the line when Lock returns; after an attempt of unknown
// outcome (ambiguous) when ctx has ended, for at most abandonGrace: the
// caller's deadline has passed, and a backend that failed to answer must
// not hold the call much beyond it. A release whose outcome is unknown
// is repeated in the background, as [Mutex.release] does, rather than
// holding up a call that already failed.
func (m *Mutex) abandon(ctx context.Context, l driver.Lease, ambiguous bool) {
	first := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.releaseTimeout)
		err := m.c.backend.Release(rctx, l)
		cancel()
		first <- err
		if !settled(err) {
			_ = m.release(ctx, l) // best effort: the lease expires anyway
		}
	}()
	if !(ambiguous && ctx.Err() != nil) {
		<-first
		return
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	}
}

// settled reports whether a release that returned err has a known
// outcome: done, not held, or refused in a way a repeat would meet again.
func settled(err error) bool {
	return err == nil || isNotHeld(err) || refused(err)
}

// release ends the holding l on the backend. A release is idempotent, so
// it is repeated, with a short backoff, until its outcome is known: nil,
// ErrNotHeld, or a refusal that a repeat would meet again. It runs
// detached from ctx, whose cancellation must not leave the key held for a
// whole lease (a scheduler that cancels a job's context at shutdown does
// just that mid-call), bounded by the release timeout or ctx's deadline,
// whichever is later. It returns the last attempt's error.
func (m *Mutex) release(ctx context.Context, l driver.Lease) error {
	bound := m.opts.releaseTimeout
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && time.Until(d) > bound {
		bound = time.Until(d)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	var t *time.Timer
	var answer error // the last error that came from the backend, not the bound
	for n := 1; ; n++ {
		err := m.c.backend.Release(rctx, l)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			answer = err
		}
		if settled(err) || rctx.Err() != nil {
			if t != nil {
				t.Stop()
			}
			return releaseFailed(err, answer)
		}
		delay := releaseBackoff.Next(n)
		if d, _ := rctx.Deadline(); time.Until(d) <= delay {
			return releaseFailed(err, answer) // no time for another attempt
		}
		if t == nil {
			t = time.NewTimer(delay)
		} else {
			t.Reset(delay)
		}
		select {
		case <-t.C:
		case <-rctx.Done():
			return releaseFailed(err, answer)
		}
	}
}

// releaseFailed is the error of a release whose last attempt failed with
// err. When that attempt only ran out of time, the backend's last real
// answer (a refused connection, say) is what the caller needs to hear, so
// it is named beside the deadline.
func releaseFailed(err, answer error) error {
	if err == nil || answer == nil || err == answer || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w (the attempt before: %w)", err, answer)
}

// releaseBackoff paces the repeats of a release whose outcome is unknown:
// soon enough to end a lock within a few round trips of a blip's end.
var releaseBackoff = ExponentialBackoff(5*time.Millisecond, 250*time.Millisecond)

// abandonGrace is how long a call whose ctx has ended waits for the
// release of an attempt of unknown outcome: a backend that answers does so
// well within it, so that the call leaves nothing behind.
const abandonGrace = 100 * time.Millisecond

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
