// Package distlock provides distributed locks: mutual exclusion between
// processes on different machines. The backends are packages of their own:
// redislock (one Redis deployment: standalone, Sentinel or Cluster),
// redlock (Redlock over several independent Redis masters), zklock
// (ZooKeeper), sqllock (PostgreSQL, MySQL/MariaDB, SQLite), etcdlock (etcd,
// a module of its own) and memlock (in memory, for tests).
//
//	c := distlock.New(redislock.New(rdb))
//	l, err := c.Mutex("orders:42", distlock.WithTTL(10*time.Second)).Lock(ctx)
//	if err != nil {
//		return err // ctx ended first, or the input was invalid
//	}
//	defer l.Unlock(context.Background())
//	return writeOrder(l.Context(ctx), l.Token())
//
// # A lock is a lease
//
// A distributed lock can be lost while its holder still runs: the process
// pauses (GC, swap, SIGSTOP) past the TTL, the network drops renewals, the
// server fails over. No library can prevent that; distlock makes it visible
// and safe to act on:
//
//   - Every holding has a fencing token ([Lock.Token]) that is strictly
//     greater than every earlier holding's of the same key. Pass it to the
//     resource you write; the resource rejects a token lower than the highest
//     it has seen (package fence), so a holder that lost its lease without
//     knowing cannot overwrite its successor's work.
//   - [Lock.Done] closes, and [Lock.Context] is cancelled, the moment the
//     lease can no longer be trusted: a renewal was refused, no renewal was
//     confirmed before [Lock.ValidUntil], or the backend reported the holding
//     gone. [Lock.Err] says which.
//   - The deadline is local and on the monotonic clock: acquisition start +
//     TTL − the backend's drift allowance. Wall-clock jumps do not move it.
//
// # Waiting
//
// [Mutex.Lock] waits until it holds the lock or its ctx ends; it never gives
// up on its own. Backends that can notify (driver.Capabilities.Notify) wake
// a waiter within about one round trip of the release, and fair ones wake
// only the waiter whose turn it is; otherwise it polls with jittered
// backoff, never sleeping past the holder's remaining lease.
// [Mutex.TryLock] makes one attempt and returns [ErrNotObtained] if the lock
// is held.
//
// # Several locks
//
// [LockAll] and [TryLockAll] take several mutexes as one [MultiLock]: all or
// none, in key order, so callers locking overlapping sets cannot deadlock.
//
// # Other kinds
//
// [Client.Semaphore] bounds concurrency to n holders, each permit a lease
// of its own; [Client.RWMutex] lets readers share and a writer hold alone;
// [WithFairness] makes a mutex first-come, first-served. A [Mutex] locked
// with an [OwnerID] ([WithOwner], [ContextWithOwner]) is re-entrant: the
// owner may take it again while it holds it, and a held lock can be handed
// to another process. Backends state what they offer
// (driver.Capabilities); what they do not fails with an error wrapping
// errors.ErrUnsupported.
//
// # Inspection
//
// [Client.Inspect] describes a lock without taking it: held or not, its
// kind, fencing token, remaining lease, hold count and the holder's
// metadata. It never shows an owner's token or identity.
//
// # Renewal
//
// A watchdog renews the lease while it is held, until Unlock: after every
// confirmed renewal the next is due within a third of the validity that
// renewal confirmed. A refused renewal ends the handle at once; failing
// ones are retried until the deadline, which then ends it.
// [WithoutAutoRefresh] turns the watchdog off, leaving [Lock.Refresh] to
// the caller. A handle sends one renewal at a time, the watchdog's and
// Refresh's alike, so the store applies them in order; a renewal whose
// outcome is unknown only ever shortens the deadline.
//
// # Errors
//
// A key is one kind of lock while anyone holds it: a mutex, a read-write
// lock or a semaphore of one size. Asking for another kind fails at once
// with [ErrKindMismatch], from Lock as from TryLock.
//
// Errors wrap the sentinels below; test them with errors.Is. Invalid input
// (an empty key, a TTL under [MinTTL], a nil backend) is reported by Lock and
// TryLock, never by a panic. Errors from a wait that ctx ended wrap both
// [ErrNotObtained] and ctx.Err().
//
// # Backends
//
// A backend implements the single-attempt contract of package driver, one
// interface with every method required; retry, waiting, renewal, loss
// detection and observation live here, once, and the backend keeps the
// state of each key (holds, queues, re-entrant counts) where every client
// sees it. Backends share one policy for options: an invalid option given
// to a backend's constructor makes every call fail at once with an error
// wrapping [ErrInvalidBackend] that names the option (only a constructor
// that does I/O returns it), as an invalid option of this package makes
// Lock and TryLock fail with [ErrInvalidArgument]. Every backend passes the
// conformance suite in package distlocktest against a real server. [Open] makes a client
// from a URL such as "redis://localhost:6379/0" once the backend's package is
// imported.
package distlock
