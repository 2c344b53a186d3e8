package distlock

import (
	"errors"
	"fmt"

	"github.com/distlock-go/distlock/driver"
)

// Sentinel errors. Check them with [errors.Is]: the errors distlock returns
// wrap them, together with the backend's error or ctx.Err() where there is one.
var (
	// ErrNotObtained means the lock is held by someone else. TryLock returns
	// it at once; Lock returns it, joined with ctx.Err(), when ctx ends
	// before the lock could be taken.
	ErrNotObtained = errors.New("distlock: lock not obtained")

	// ErrRestartGuard means the lock was not obtained although nobody may
	// hold it: the backend's restart guard grants no new lock for a while
	// after its store may have lost data (a Redis server that restarted,
	// or one too new to tell), because a lease granted before the loss
	// could still be alive. It wraps [ErrNotObtained]. The guard ends on
	// its own after the longest lease; [Client.DeclareFresh] ends it at
	// once where the servers are known to have lost nothing. TryLock
	// returns it; Lock waits the guard out, and wraps it in its error if
	// ctx ends first.
	ErrRestartGuard = fmt.Errorf("%w: the restart guard holds new locks back", ErrNotObtained)

	// ErrKindMismatch means the key is held as another kind of lock (a
	// mutex, a read-write lock, a semaphore) or as a semaphore of another
	// size. A key is one kind of lock while anyone holds it: TryLock and
	// Lock fail at once with an error that wraps both this and
	// [ErrNotObtained] and names both kinds; Lock does not wait, since a
	// key used two ways is a mistake in the program, not contention. It is
	// [driver.ErrKindMismatch]; the error wraps a [*driver.KindError].
	ErrKindMismatch = driver.ErrKindMismatch

	// ErrLockLost means the lease can no longer be trusted: a renewal was
	// refused because the key expired or was taken over, or the backend
	// reported the holding gone. Another holder may exist.
	ErrLockLost = errors.New("distlock: lock lost")

	// ErrLockExpired means the lease reached its local deadline
	// ([Lock.ValidUntil]) without a confirmed renewal. It wraps
	// [ErrLockLost]: errors.Is(err, ErrLockLost) holds for it too.
	ErrLockExpired = fmt.Errorf("%w: not renewed before its deadline", ErrLockLost)

	// ErrLockReleased means the handle was already unlocked.
	ErrLockReleased = errors.New("distlock: lock released")

	// ErrInvalidKey reports an empty or overlong key, or one the backend
	// cannot store.
	ErrInvalidKey = errors.New("distlock: invalid key")

	// ErrInvalidTTL reports a TTL that is not positive or too small to be
	// renewed in time (see [MinTTL]).
	ErrInvalidTTL = errors.New("distlock: invalid TTL")

	// ErrInvalidBackend reports a nil backend, an interface holding a nil
	// pointer such as (*memlock.Backend)(nil), or a backend that says it
	// cannot work as it was set up (an invalid option, or closed). It is
	// [driver.ErrInvalidBackend], which backends wrap.
	ErrInvalidBackend = driver.ErrInvalidBackend

	// ErrClientClosed means the [Client] was closed: it takes no more
	// locks, and a Lock waiting when it closed returns an error wrapping
	// it (and [ErrNotObtained]).
	ErrClientClosed = errors.New("distlock: client closed")

	// ErrInvalidArgument reports an option with a value that cannot work,
	// such as a negative interval, or a nil context.
	ErrInvalidArgument = errors.New("distlock: invalid argument")
)

// Errors of [Open].
var (
	// ErrInvalidURL reports a backend URL that cannot be parsed or lacks
	// what its scheme needs.
	ErrInvalidURL = errors.New("distlock: invalid backend URL")

	// ErrUnknownScheme reports a URL whose scheme no backend registered.
	// Backends register when their package is imported.
	ErrUnknownScheme = errors.New("distlock: unknown URL scheme")
)
