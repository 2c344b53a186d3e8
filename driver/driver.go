// Package driver defines the contract that distlock backends implement.
//
// Application code should use package distlock; this package is for people
// writing a backend. A backend makes exactly one attempt per call and reports
// what happened: retrying, waiting, renewal and loss detection live once, in
// the root package, for every backend.
//
// # Concurrency
//
// Every method of [Backend], [Waiter] and [Watch] may be called concurrently
// from many goroutines, for the same key or for different keys. A backend
// value stands for one client (one process, one connection pool); two backend
// values built on separate connections behave like two processes.
//
// # Owners
//
// Each acquisition carries an owner string chosen by the caller: 128 random
// bits, fresh for every call of distlock's Lock or TryLock, reused across
// that call's retries. Acquire must be idempotent for a given owner: if the
// key is already held by the same owner, Acquire reports it granted with the
// same fencing token. That is how a reply lost in transit ("timed out, but the
// server applied it") is resolved rather than guessed.
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrNotHeld is returned by [Backend.Release] and [Backend.Refresh] when the
// key is not held by the given owner: it expired, was deleted, or is held by
// someone else. Such a call must change nothing.
var ErrNotHeld = errors.New("distlock/driver: lock not held by this owner")

// ErrInvalidKey may be returned by a backend for a key it cannot store
// (for example a character its namespace forbids). The root package already
// rejects empty and overlong keys.
var ErrInvalidKey = errors.New("distlock/driver: invalid key")

// Backend is a single-attempt lock store.
type Backend interface {
	// Acquire makes one attempt to take the lock described by req.
	// It returns Grant.Acquired == false, with a nil error, when the key is
	// held by another owner. An error means the outcome is unknown: the
	// caller either retries with the same owner or releases.
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)

	// Release deletes the lock if, and only if, owner holds it, and wakes
	// waiters. It returns ErrNotHeld when owner does not hold key.
	Release(ctx context.Context, key, owner string) error

	// Refresh extends the lease of owner on key to ttl from now, if, and
	// only if, owner still holds it. It returns how long after the call
	// started the lease can be trusted (ttl less any clock drift allowance),
	// or ErrNotHeld.
	Refresh(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error)

	// Capabilities reports the optional behaviour the backend provides.
	// The conformance suite tests every capability that is claimed.
	Capabilities() Capabilities
}

// AcquireRequest describes one acquisition attempt.
type AcquireRequest struct {
	Key   string        // the lock's name, non-empty
	Owner string        // random owner token, see the package doc
	TTL   time.Duration // lease length, > 0
	// Meta describes the holder for inspection tools (host, pid, ...).
	// Backends that can store it should; it never affects locking. The
	// same read-only map may be passed on every call: do not modify it.
	Meta map[string]string

	// Fair asks for first-come, first-served order (Capabilities.Fair):
	// the lock is granted only if it is free and no live waiter queued
	// before this owner.
	Fair bool

	// Queue, with Fair, asks a backend to put the owner in the key's queue
	// of waiters when the attempt is not granted, or to keep it there. The
	// entry lives for Queue unless the next attempt renews it, so a waiter
	// that vanishes holds up the queue for at most that long. Zero: an
	// attempt that does not queue (TryLock).
	Queue time.Duration
}

// Grant is the outcome of one acquisition attempt.
type Grant struct {
	// Acquired reports whether the owner now holds the lock.
	Acquired bool

	// Token is the fencing token of this holding: strictly greater than the
	// token of every earlier holding of the same key. Set when Acquired.
	Token uint64

	// ValidFor is how long after the attempt started the lease can be
	// trusted: the TTL less the backend's clock drift allowance (and, for
	// multi-node algorithms, less the time the attempt took). Set when
	// Acquired; it must be positive.
	ValidFor time.Duration

	// RetryAfter, when not Acquired, is the holder's remaining lease as far
	// as the backend knows: a bound on how long polling should sleep, also
	// for a waiter whose watch is in place (its own sleep is a long safety
	// poll). Zero means unknown. A backend that knows the lease has run out
	// or is about to (a remaining TTL that rounds to zero) reports a small
	// positive value, such as 1ms, so that the waiter retries at once
	// rather than after its safety poll.
	RetryAfter time.Duration

	// Lost, if not nil, is closed by the backend when it learns that the
	// holding is gone (a session expired, a lease was revoked). Backends
	// whose leases only end by TTL leave it nil.
	Lost <-chan struct{}
}

// Capabilities lists optional behaviour of a backend.
type Capabilities struct {
	// NotifiedWait: the backend implements [Waiter] and notifies a watcher
	// within about one round trip of a release.
	NotifiedWait bool

	// Semaphore: the backend implements [Semaphore].
	Semaphore bool

	// ReadWrite: the backend implements [RWLocker].
	ReadWrite bool

	// Fair: the backend honours AcquireRequest.Fair and Queue, granting
	// the lock to waiters in the order they queued, and implements [Queuer].
	Fair bool
}

// Semaphore is implemented by backends that offer counting semaphores: a
// key that up to n owners hold at once, each with a lease of its own. Its
// methods mirror those of [Backend], on the owner's permit; Fair and Queue
// of the request are ignored. A key is used either as a lock or as a
// semaphore, and with the same n by every client.
type Semaphore interface {
	// AcquirePermit takes one of the n permits of key for req.Owner, or
	// reports not acquired (RetryAfter: until the first permit expires).
	// It is idempotent per owner, like Acquire.
	AcquirePermit(ctx context.Context, req AcquireRequest, n int) (Grant, error)
	// ReleasePermit gives owner's permit back, or returns ErrNotHeld.
	ReleasePermit(ctx context.Context, key, owner string) error
	// RefreshPermit extends owner's permit, or returns ErrNotHeld.
	RefreshPermit(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error)
}

// RWLocker is implemented by backends that offer read-write locks: many
// readers share a key, or one writer holds it alone. The writer's lock is
// released and refreshed with [Backend.Release] and [Backend.Refresh]; a
// reader's with ReleaseShared and RefreshShared. A key is used either as a
// plain lock or as a read-write lock.
type RWLocker interface {
	// AcquireExclusive is Acquire for a writer: granted only when neither a
	// writer nor a live reader holds key. When not granted and req.Queue >
	// 0, the writer is announced as waiting for req.Queue (renewed by each
	// attempt), and new readers are refused meanwhile, so a stream of
	// readers cannot starve writers. Release by a writer that gave up
	// withdraws its announcement.
	AcquireExclusive(ctx context.Context, req AcquireRequest) (Grant, error)
	// AcquireShared takes key for reading: granted when no writer holds it
	// and none is waiting. Idempotent per owner.
	AcquireShared(ctx context.Context, req AcquireRequest) (Grant, error)
	// ReleaseShared ends owner's read lease, or returns ErrNotHeld.
	ReleaseShared(ctx context.Context, key, owner string) error
	// RefreshShared extends owner's read lease, or returns ErrNotHeld.
	RefreshShared(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error)
}

// Queuer is implemented by fair backends.
type Queuer interface {
	// Leave takes owner out of key's queue of waiters, and releases the
	// lock if owner holds it (a grant that raced with giving up). It is
	// not an error if owner was in neither.
	Leave(ctx context.Context, key, owner string) error
}

// Waiter is implemented by backends that can notify waiters of a release,
// so that waiting is notified rather than polled.
type Waiter interface {
	// Watch subscribes to releases of key. The subscription is in place
	// when Watch returns, so a release that happens after Watch returns is
	// never missed. The caller must Close the watch.
	Watch(ctx context.Context, key string) (Watch, error)
}

// TurnWaiter is implemented by fair backends whose notifications can name
// the waiter whose turn it is. distlock uses WatchTurn instead of Watch for
// fair locks, so a release wakes the next waiter only, not all of them.
type TurnWaiter interface {
	// WatchTurn is Watch for the waiter owner: the watch fires on releases
	// that name owner or name nobody.
	WatchTurn(ctx context.Context, key, owner string) (Watch, error)
}

// Watch is a subscription to the releases of one key.
type Watch interface {
	// C receives a value after the key may have become free. Several
	// releases may be coalesced into one value; a value may also arrive
	// when nothing changed (for example after a reconnect), so the receiver
	// always re-tries to acquire.
	C() <-chan struct{}
	// Close ends the subscription. It is safe to call more than once.
	Close() error
}

// DefaultDrift returns the clock drift allowance for a lease of length ttl:
// 1% of ttl plus 2ms, the figure the Redlock description uses. Backends
// subtract it from the TTL when they report Grant.ValidFor.
func DefaultDrift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// Inspector is implemented by backends that can describe a lock without
// taking it, for tools such as `distlock status`.
type Inspector interface {
	// Inspect reports the state of key. A key that is not held is not an
	// error: Info.Held is false.
	Inspect(ctx context.Context, key string) (Info, error)
}

// Info describes a lock as seen by [Inspector.Inspect].
type Info struct {
	Held bool
	// Token is the fencing token of the current holding, or of the last
	// one when the key is free (0 if the key was never locked).
	Token uint64
	// TTL is the remaining lease of the holder, when Held.
	TTL time.Duration
	// Meta is what the holder stored about itself (host, pid, since...).
	Meta map[string]string
}
