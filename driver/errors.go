package driver

import (
	"errors"
	"fmt"
	"time"
)

// The errors of the contract. A backend returns them, or wraps them with
// its own words, so that package distlock, which imports no backend, can
// tell what happened: which refusals are final, and what to tell the user.

// ErrNotHeld is returned by [Backend.Release] and [Backend.Refresh] when the
// owner does not hold the lease: it expired, was taken over, or never
// existed. Such a call changes nothing else.
var ErrNotHeld = errors.New("distlock/driver: lock not held by this owner")

// ErrInvalidKey, wrapped in an error of [Backend.Acquire], says the backend
// can never store the key (a character or a length it cannot take).
// distlock then fails the call at once instead of retrying.
var ErrInvalidKey = errors.New("distlock/driver: invalid key")

// ErrKindMismatch, wrapped in an error of [Backend.Acquire] (a
// [*KindError]), says the key is held as another family of lock than the
// request asks for, or as a semaphore of another size. Nothing was taken.
// The request may succeed once those holdings end, but a key used two ways
// is a mistake in the caller's code: package distlock fails the call at
// once instead of waiting.
var ErrKindMismatch = errors.New("distlock/driver: key held as another kind of lock")

// ErrInvalidBackend, wrapped in an error of any method, says the backend
// cannot work as it was set up: a nil *Backend, one not made by its
// constructor, one given an invalid option (see [OptionCheck]), or one
// that was closed. Nothing was taken, and a repeat fails the same way.
// Package distlock returns it for a nil backend too, as
// distlock.ErrInvalidBackend, which is this error; so its text is the one
// users see, without the driver's prefix.
var ErrInvalidBackend = errors.New("distlock: invalid backend")

// ErrInvalidRequest, wrapped in an error of a method, says the request
// breaks the contract: a TTL that is not positive, an unknown [Kind], a
// semaphore of no permits, an empty owner... [Request.Validate] and
// [Lease.Validate] report these. Nothing was taken or changed, and a
// repeat fails the same way. Package distlock checks its input before it
// asks, so it sends none of these; it fails the call at once if a backend
// refuses one anyway (a backend with narrower limits than the contract's).
var ErrInvalidRequest = errors.New("distlock/driver: invalid request")

// ErrTTLTooLong, wrapped in an error of [Backend.Acquire] or
// [Backend.Refresh] (a [*TTLTooLongError]), says the TTL is longer than
// the longest lease the backend grants. Nothing was taken or extended.
var ErrTTLTooLong = errors.New("distlock/driver: TTL longer than the backend's maximum lease")

// TTLTooLongError is the error of a backend with a maximum lease length
// for a longer TTL. It wraps [ErrTTLTooLong] and [errors.ErrUnsupported],
// so that a caller that knows only the contract's final refusals
// (ErrUnsupported among them) still fails at once.
//
// A backend returns it as it is or wrapped in its own words:
//
//	if ttl > b.maxTTL {
//		return fmt.Errorf("redislock: %w", &driver.TTLTooLongError{TTL: ttl, Max: b.maxTTL, Why: "…"})
//	}
type TTLTooLongError struct {
	TTL time.Duration // what the request asked for
	Max time.Duration // the longest lease the backend grants
	Why string        // optional: why there is a maximum, and how to raise it
}

func (e *TTLTooLongError) Error() string {
	msg := fmt.Sprintf("TTL %v is above the maximum lease length %v", e.TTL, e.Max)
	if e.Why != "" {
		msg += ", " + e.Why
	}
	return msg
}

// Unwrap returns ErrTTLTooLong and errors.ErrUnsupported.
func (e *TTLTooLongError) Unwrap() []error { return []error{ErrTTLTooLong, errors.ErrUnsupported} }

// KindError is the error of [Backend.Acquire] for a request of another
// family, or another semaphore size, than the key's holdings. It wraps
// [ErrKindMismatch].
type KindError struct {
	Key        string
	Held       Kind // the family the key is held as (Write for a read-write lock)
	HeldLimit  int  // with Held == Permit: the semaphore's size (0: unknown)
	Asked      Kind // the kind the request asked for
	AskedLimit int  // with Asked == Permit: the size it asked for
}

func (e *KindError) Error() string {
	return fmt.Sprintf("key %q is held as %s; the request for %s cannot share it (use another key for another kind of lock)",
		e.Key, describeKind(e.Held, e.HeldLimit), describeKind(e.Asked, e.AskedLimit))
}

// Unwrap returns ErrKindMismatch.
func (e *KindError) Unwrap() error { return ErrKindMismatch }

// describeKind names a family for KindError: "a mutex", "a read-write
// lock", "a semaphore of 3 permits".
func describeKind(k Kind, limit int) string {
	switch k {
	case Exclusive:
		return "a mutex"
	case Write, Read:
		return "a read-write lock"
	case Permit:
		if limit > 0 {
			return fmt.Sprintf("a semaphore of %d permits", limit)
		}
		return "a semaphore"
	}
	return "a lock of " + k.String()
}
