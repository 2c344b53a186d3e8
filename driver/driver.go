// Package driver defines the contract that distlock backends implement.
//
// Application code should use package distlock; this package is for people
// writing a backend. A backend is one interface, [Backend], with every
// method required. Each call makes one attempt and reports what happened:
// retrying, waiting, renewal, loss detection and owner identities live
// once, in package distlock. The state of each key lives in the backend,
// where every client sees it: its holdings, its line of waiters, and the
// count of a re-entrant lock's holds (package distlock only gives each
// owner its identity, Request.Reentry). What a backend offers beyond
// exclusive locks it declares once, in [Capabilities]; the conformance
// suite (package distlocktest) tests every claim. Because every method is
// required, a wrapper (metrics, tracing, fault injection) embeds a
// Backend, overrides what it needs, and cannot lose a capability.
//
// The contract stands alone: a backend imports this package, not package
// distlock (except to register a URL scheme). It finds here the errors it
// returns ([ErrNotHeld], [ErrInvalidKey], [ErrInvalidRequest],
// [ErrInvalidBackend], [ErrKindMismatch], [ErrTTLTooLong]), the one check
// of a request every backend makes first ([Request.Validate],
// [Lease.Validate], [ValidateKey]), the one policy for an invalid option
// ([OptionCheck]), and the name of a holding in its books ([LeaseID]).
//
// Every method may be called concurrently, for the same key or different
// keys. A Backend value stands for one client; two values on separate
// connections behave like two processes.
//
// A holding is named by a [Lease]. Its Owner is a token chosen by the
// caller: 128 random bits, fresh for every Lock or TryLock and reused across
// that call's retries. A reply lost in transit is resolved by calling again
// with the same owner, so every method is idempotent per owner: a repeated
// Acquire reports the same grant (never one more hold), a repeated Release
// reports success, a repeated Refresh extends again.
package driver

import (
	"context"
	"fmt"
	"time"
)

// Kind is what a lease takes of its key. A key is used by one family at a
// time: as a mutex (Exclusive), as a read-write lock (Write and Read) or as
// a semaphore (Permit, with one Limit). A backend keeps the family (and a
// semaphore's Limit) as part of the key's state while any holding of the
// key exists, and refuses a request of another family, or of another
// Limit, with a [*KindError]: Exclusive and Write exclude each other, as
// do Permit with Limit 2 and Permit with Limit 5.
type Kind uint8

const (
	Exclusive Kind = iota // the key alone: a mutex
	Write                 // a read-write lock alone, when no reader holds it
	Read                  // a read-write lock shared with other readers
	Permit                // one of Request.Limit permits of a semaphore
)

// String returns "mutex", "write lock", "read lock" or "semaphore permit".
func (k Kind) String() string {
	switch k {
	case Exclusive:
		return "mutex"
	case Write:
		return "write lock"
	case Read:
		return "read lock"
	case Permit:
		return "semaphore permit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Family reports the family of a kind, which must match between holdings of
// one key: Write and Read share theirs; Exclusive and Permit have their own.
func (k Kind) Family() Kind {
	if k == Read {
		return Write
	}
	return k
}

// Compatible reports whether a key held as (held, heldLimit) may be asked
// for as (asked, askedLimit) at all, that is whether the request is of the
// same family (and, for Permit, the same Limit). Whether it is granted
// then depends on the holdings, as usual. Limits count only for Permit.
func Compatible(held Kind, heldLimit int, asked Kind, askedLimit int) bool {
	if held.Family() != asked.Family() {
		return false
	}
	return held != Permit || heldLimit == askedLimit
}

// Lease names one holding: what Acquire takes and Release and Refresh act on.
type Lease struct {
	Key   string // the lock's name: 1 to MaxKeyLen bytes
	Owner string // this holding's token, 1 to MaxOwnerLen bytes: see the package doc
	Kind  Kind
}

// LeaseID is the pair that names a holding in a backend's own books (a
// release to repeat, a grant to give back, a node per owner): the key
// and the owner. An owner is never reused across kinds, so Kind adds
// nothing to it.
type LeaseID struct {
	Key   string
	Owner string
}

// ID returns the key and owner of l.
func (l Lease) ID() LeaseID { return LeaseID{Key: l.Key, Owner: l.Owner} }

// Request is one acquisition attempt.
type Request struct {
	Lease
	TTL   time.Duration // lease length, > 0
	Limit int           // with Permit: the semaphore's size, >= 1

	// Meta describes the holder (host, pid, ...) for Inspect to show; it
	// never affects locking. The same read-only map may come on every call.
	Meta map[string]string

	// Fair (Capabilities.Fair; Exclusive only) grants the lock only if no
	// live waiter queued before this owner.
	Fair bool

	// Queue, when the attempt is not granted, keeps the owner's place for
	// Queue: a Fair waiter's place in line, or a Write waiter's claim that
	// keeps new readers out so that readers cannot starve writers. Each
	// attempt renews it, so a waiter that vanished holds others up for at
	// most Queue. Zero for an attempt that does not wait (TryLock).
	Queue time.Duration

	// Reentry (Capabilities.Reentrant; Exclusive only), if not empty, is
	// the caller's re-entrant identity, a secret: the lock is granted
	// while held by holdings with the same Reentry, as one more hold with
	// their token. The lease ends when its last hold is released or when
	// it expires. Refreshing any hold renews the lease, and while it has
	// other holds, neither Acquire nor Refresh may shorten it.
	Reentry string
}

// Grant is the outcome of one acquisition attempt.
type Grant struct {
	Acquired bool

	// Token, when Acquired, is the fencing token: greater than the token
	// of every earlier holding of the key. Re-entrant holds share one.
	Token uint64

	// ValidFor, when Acquired, is how long after the attempt started the
	// lease can be trusted: TTL less the clock drift allowance (and, for
	// multi-node algorithms, less the attempt's duration). Positive. It
	// may be much shorter for a lease that a release handed over to a
	// waiter (see redislock's fair locks); the caller then extends it at
	// once, by Refresh or by repeating the Acquire.
	ValidFor time.Duration

	// RetryAfter, when not Acquired, is how long until the lease in the
	// way ends at the latest, as far as the backend knows; zero: unknown.
	// A lease known to end now is reported as a small positive value.
	RetryAfter time.Duration

	// Guarded, when not Acquired, says that the backend's restart guard
	// refused the grant, not a holder: the store may have lost data, and
	// grants no new lease until RetryAfter has passed or the store is
	// declared fresh (see [FreshDeclarer]).
	Guarded bool

	// Lost, if not nil, is closed when the backend learns that the holding
	// is gone (a session expired). Leases that only end by TTL leave it nil.
	Lost <-chan struct{}
}

// Capabilities lists what a backend offers beyond exclusive locks. Claim
// only what the backend does: the conformance suite tests each claim.
type Capabilities struct {
	Notify    bool // Watch reports releases; without it, waiters poll
	Fair      bool // Request.Fair; with Notify, a release wakes the next in line only
	ReadWrite bool // kinds Write and Read
	Semaphore bool // kind Permit
	Reentrant bool // Request.Reentry
}

// Backend is a lock store that makes one attempt per call.
type Backend interface {
	// Capabilities reports what the backend offers. It never changes.
	Capabilities() Capabilities

	// Acquire makes one attempt to take the lease req describes, and
	// returns Acquired == false (and a nil error) if it is taken. An
	// error means the outcome is unknown: the caller repeats the call
	// or releases; but one wrapping ErrInvalidKey, ErrInvalidRequest,
	// errors.ErrUnsupported (what the backend does not offer, a TTL above
	// its maximum: see TTLTooLongError) or ErrInvalidBackend (a backend
	// set up wrongly, or closed) says nothing was taken, and that a repeat
	// would fail the same way; one wrapping ErrKindMismatch says
	// nothing was taken because the key is held as another kind (see
	// [Kind]). A repeat
	// by an owner that holds the lease extends it, reporting the same grant.
	Acquire(ctx context.Context, req Request) (Grant, error)

	// Release ends the owner's holding if it has one, takes the owner out
	// of the key's queue, withdraws its Write claim, and wakes the waiters
	// this lets in. Without a holding it returns ErrNotHeld, unless this
	// owner released it lately (a few seconds at least): then the call is
	// a repeat, and it returns nil.
	Release(ctx context.Context, l Lease) error

	// Refresh extends the owner's lease to ttl from now and returns how
	// long after the call started it can be trusted, or ErrNotHeld.
	Refresh(ctx context.Context, l Lease, ttl time.Duration) (time.Duration, error)

	// Watch subscribes to the releases of key. It is in place when Watch
	// returns: no later release is missed that ends a lease which refused
	// an Acquire of key made after that. (A backend may keep quiet about
	// the release of a lease nobody asked for, so a waiter tries once more
	// after Watch returns, and only then sleeps.) owner is a Fair
	// waiter's, or empty: a Fair backend may then fire only for the waiter
	// whose turn it is, and must fire for it. Without Notify, it returns
	// an error wrapping errors.ErrUnsupported.
	Watch(ctx context.Context, key, owner string) (Watch, error)

	// Inspect describes key without changing it. A free key is not an
	// error. Owners and Reentry identities are never shown.
	Inspect(ctx context.Context, key string) (Info, error)

	// List describes the held keys whose names begin with prefix (every
	// held key when prefix is empty), as Inspect would, in key order. It
	// is for operators: it may scan the whole store, and a key may change
	// while the list is made.
	List(ctx context.Context, prefix string) ([]KeyInfo, error)

	// Break ends every holding of key, whoever holds it (the lock and its
	// re-entrant holds, the readers, or the permits), and wakes the
	// waiters. It is for operators, to free a lock whose holder is stuck
	// but still renewing: the holders are not told, and their next Refresh
	// or Release returns ErrNotHeld. The key's fencing counter is kept, so
	// the next holding's token is still greater; places in line are kept.
	// It returns the key as Inspect described it just before (Held false:
	// nothing was held and nothing changed). Repeating it is harmless.
	Break(ctx context.Context, key string) (Info, error)

	// Close frees what the backend opened itself (subscriptions,
	// sessions), not the clients it was given, nor held locks.
	Close() error
}

// FreshDeclarer is implemented by backends with a restart guard (redislock,
// redlock): a store that may have lost data refuses new grants for a while,
// and DeclareFresh tells it that its servers lost nothing since they
// started, so that it grants at once. See the backends' docs for when
// that is safe. It is optional: distlock.Client.DeclareFresh calls it
// where the backend has it.
type FreshDeclarer interface {
	DeclareFresh(ctx context.Context) error
}

// MarkWatcher is implemented by backends with Notify whose watches can
// tell a waiter whether a release may have gone unheard before the watch
// was in place (redislock). It is optional: without it, a waiter tries
// once more after every Watch, as Backend.Watch says.
type MarkWatcher interface {
	// WatchMark returns a mark of what the watches of key have heard so
	// far, to be taken before an Acquire of key is sent. It costs no
	// round trip.
	WatchMark(key string) uint64

	// WatchSince is Watch for a waiter whose Acquire of key, sent after
	// mark was taken, was refused. It also reports missed: whether the
	// release of the lease that refused the Acquire may have gone unheard.
	// When missed is false, no release since that Acquire is missed, and
	// the waiter may sleep at once; when true, it tries once more first.
	WatchSince(ctx context.Context, key, owner string, mark uint64) (w Watch, missed bool, err error)
}

// Watch is a subscription to the releases of one key.
type Watch interface {
	// C receives after the key may have become free. Releases may be
	// coalesced, and a value may come when nothing changed: retry then.
	C() <-chan struct{}
	// Close ends the subscription; calling it again does nothing.
	Close() error
}

// KeyInfo is one key of a [Backend.List].
type KeyInfo struct {
	Key string
	Info
}

// Info describes a key as [Backend.Inspect] sees it.
type Info struct {
	Held  bool
	Kind  Kind          // when Held
	Token uint64        // the newest holding's; when free, the last issued (0: never, or forgotten since)
	TTL   time.Duration // when Held: the remaining lease (the longest one)
	Holds int           // when Held: re-entrant holds, readers or permits
	Limit int           // when Held as Permit: the semaphore's size (0: unknown)
	Meta  map[string]string

	// Warnings name, one short sentence each, conditions of the
	// deployment that put the lock's guarantees at risk (an eviction
	// policy that may drop lock keys, say).
	Warnings []string
}

// DefaultDrift returns the clock drift allowance for a lease of length ttl:
// 1% of ttl plus 2ms, the figure of the Redlock description.
func DefaultDrift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}
