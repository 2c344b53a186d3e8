// Package etcdlock is a distlock backend on etcd v3, through the client
// go.etcd.io/etcd/client/v3. It is a Go module of its own, so that only
// programs that import it download etcd's client and gRPC:
//
//	go get github.com/distlock-go/distlock/etcdlock
//
// Use it with [New] on a *clientv3.Client, or import it for its side
// effect and open an etcd:// URL with distlock.Open (see [OpenURL]).
//
// # How it works
//
// A holding is an etcd key under the lock's prefix, attached to an etcd
// lease (the holds of a re-entrant lock share one: see below). Holdings
// are ordered by their keys' create revisions: the lowest one holds a
// mutex, readers hold until the first writer in line, the first n keys hold the permits of a semaphore of n. A fair
// waiter, or a writer, keeps its key as its place in line, so a release
// wakes one waiter (no herd effect), in the order they came. A fair mutex
// waiter with at most 16 keys ahead watches the line and learns from the
// watch that the keys ahead are gone and its own is not: its key holds the
// lock from then on, and its next attempt is granted without a request,
// one round trip (the release's) after the release. A waiter further back
// watches only the key just before its own, as concurrency.Mutex does.
// Watches start at the cluster's current revision: etcd serves a watch
// from a past revision by a catch-up that runs every 100ms. Other waiters do not queue: an attempt
// that is refused leaves nothing, so such a waiter has no key whose
// predecessor it could watch (and the driver contract names the owner to
// Watch only for fair waiters). They are woken by every release of the
// lock, and all try again: that herd is the price of an unfair lock, and
// distlock.WithFairness the way to avoid it. A waiter that gives up
// deletes its key.
//
// A key is used as one kind of lock at a time: the names of its holdings
// and waiters tell their family (mutex, read-write lock, or semaphore,
// whose size is part of the name), and every transaction that puts a key
// also checks that none of another family, or of another semaphore size,
// exists. A request refused for that returns a *driver.KindError, which
// names both kinds; two requests of different families at once are never
// both granted. A permit's key is put only if no permit was put since the
// attempt counted fewer than the semaphore's size, so every permit key
// holds from the transaction that put it.
//
// A key is named by the backend that puts it: a random id of the backend
// and a slot number, the first that none of the backend's keys in the
// line has, reused once the key it named is gone (etcd keeps a deleted
// key until the cluster is compacted, and every read of the line walks
// it: a name per acquisition would slow a lock down as it is used).
// Holdings and waiters of one lock at once through one backend have
// distinct slots. The key's value names its owner, and every check that a
// key is the owner's compares the value the owner's attempts put (or the
// key's create revision, once known), so a key that had the name before
// is never taken for the owner's. A Release through a backend that took
// no part in the holding finds the key by its owner in the line's values.
//
// Every attempt is one transaction that finds the owner's key first, so a
// reply lost in transit is recovered by the retry with the same owner: it
// finds the key and reports the same grant, and nothing is left orphaned.
// A key found under the owner's name with another owner's value (a put
// applied after its attempt gave up) is deleted, and the attempt starts
// over.
// A release leaves a receipt key for 5 to 10 seconds, so that a repeated
// release reports success; it notes the holding's token, which Inspect
// reports for the free key meanwhile (after that, a free key's token is
// 0). Nothing else is kept for a key nobody holds or waits for: every key
// the backend writes is on a lease, so a key released, given up or left
// by a crashed holder leaves nothing in etcd within the lease's TTL and
// 10 seconds. Tokens need no record to keep growing: they are create
// revisions, which etcd never issues twice.
//
// # Leases
//
// etcd leases have whole-second TTLs, and etcd raises a lease's TTL to its
// minimum if that is more: 1.5 election timeouts rounded up to whole
// seconds, which is 2 s with etcd's default election timeout of 1 s. A
// lock's TTL is rounded up to whole seconds for its lease, so a sub-second
// TTL gets a 1-second lease, or etcd's minimum. The handle's validity is
// still the TTL asked for, and a live holder that stops renewing loses its
// key at that TTL (see below). But a holder that crashes, or loses the
// cluster, is ended by its lease: a crashed holder of a 100 ms lock blocks
// the others for 1 to 2 seconds (up to the lease's TTL: 1 s, or 2 s on a
// cluster with the default election timeout), not 100 ms.
//
// The keys of one [Backend] with the same TTL in whole seconds share one
// lease (a re-entrant lock's excepted: see below), as
// concurrency.Session's locks do: an acquisition costs one
// transaction, not also a lease grant and a revocation, and a process
// keeps one lease alive per TTL, not one per held lock. The backend keeps
// each lease alive every third of its TTL while it runs, so the lease is
// what ends the locks of a process that crashed or lost the cluster. A
// lock whose holder stops renewing it in a live process ends at its own
// TTL: the backend keeps a deadline per key (renewed by each Refresh, and
// for a waiter's place by each attempt) and deletes the key when it
// passes. The deadline is armed before the attempt is sent, so a key
// whose reply was lost ends at its TTL too, even if the owner never asks
// again and its release failed.
//
// A Refresh with a TTL of other whole seconds moves the key to that TTL's
// lease, and the holding's Grant.Lost follows it: it closes when the lease
// the key is on ends (after a move of unknown outcome, any lease it may be
// on).
//
// The local validity of a holding is the TTL asked for or what is left of
// the lease, whichever is less, measured from before the request was sent,
// less the drift allowance. When etcd reports the lease gone (expired or
// revoked), or the lease could not be renewed before its deadline, every
// lock on it is lost at once: the Lock's Done channel closes and its
// Context is cancelled with distlock.ErrLockLost.
//
// Each call is bounded by [WithCallTimeout] (default [DefaultCallTimeout]),
// and an Acquire or Refresh also by its TTL, whatever its context: the etcd
// client waits for a connection as long as its context lets it, so
// without a bound TryLock(context.Background()) would never return from a
// cluster out of reach.
//
// Within that bound, requests ask the member to fail at once if it has no
// leader, and a request that reached a member just before its leader died,
// which etcd leaves unanswered, is not waited for to the end: a renewal
// (a Refresh, a keep-alive) sends the same request again each time half
// of the time left passes, keeping the first answer, and an Acquire tries
// again once half of the time left (at least a second) passed. The new
// leader, elected within a few election timeouts, answers the repeat, so
// a holder keeps its lock across a leader change that the cluster
// survives if its TTL leaves time for the election, and a waiter woken
// meanwhile is not held up by a request of its own that hangs.
//
// # Fencing tokens
//
// A holding's token is the create revision of its key, which etcd's Raft
// log assigns: a later holding's key is created at a higher revision, so
// tokens strictly increase per key, across leader changes and restarts.
// Tokens are etcd revisions, so they grow with every write to the cluster,
// not by one per holding; package fence works with them unchanged. The
// holds of a re-entrant lock share one token, the create revision of its
// identity's anchor (see below). While a key is free, Inspect reports the
// last released holding's token for as long as the release's receipt
// lasts, and 0 after that.
//
// # Re-entrant locks
//
// A re-entrant lock (distlock.WithOwner, distlock.ContextWithOwner) is an
// anchor key in the lock's line, named after a digest of the identity,
// whose create revision is the token of every hold, and one key per hold
// outside the line: the count of holds is kept in etcd. The first hold
// puts both in one transaction, if the line is empty; another hold puts
// its key if the anchor still has its create revision; a release deletes
// the owner's key, and the last one the anchor too, in one transaction. A
// repeated Acquire puts the same key again and a repeated Release finds
// its receipt, so a lost reply neither adds a hold nor removes another.
//
// The anchor and its holds are on a lease of their own, the identity's,
// granted for the first hold's TTL (in whole seconds, as above), not on a
// backend's shared lease: a lock handed to another process (the
// same identity on another client) must not end when the backend that
// took it first closes, and must not be kept alive by that backend's
// other locks. Every backend with a hold keeps the identity's lease alive,
// and ends its holds (Grant.Lost) when it ends, until its last hold there
// is released; when no holder renews it, the lease ends the anchor and
// every hold at once. So a backend that closes, or crashes, holding
// leaves its hold on the lease: the others keep the lock, which is free
// within the lease's TTL of the last release of theirs. As for other
// keys, a holder that stops renewing in a live process ends at its TTL:
// a backend keeps one deadline per identity, which each Acquire and
// Refresh of any of its holds extends (renewing one hold renews the
// others), and when it passes, deletes its holds, and the anchor if no
// other hold is left. Holds taken through another backend are renewed
// through that one. A hold with a longer TTL than the identity's lease is
// trusted for what is left of that lease, and so renewed sooner.
//
// On a backend that has a hold of the identity, a nested Acquire is one
// transaction, and so is the Release of a hold it took. The first hold
// costs a lease grant and a transaction (a refused attempt keeps the lease
// for the next). A hold taken through a backend that has none (a
// hand-over) costs that too, then one keep-alive of the identity's lease,
// to learn how long it lasts, and the transaction that adds the hold. A
// Release through a backend that did not take the hold is two
// transactions.
//
// A fair re-entrant lock (distlock.WithFairness) takes its first hold in
// turn: if the lock is held, the identity's anchor is put alone, as its
// place in line, and the hold is granted, its key put, once the anchor
// is first. Further holds of the identity, while it holds, are granted
// at once, whoever waits. While the identity only waits it holds
// nothing: a request of it that does not wait (TryLock) is refused, and
// its owners waiting at once share the one place. One that gives up
// deletes the place; the others put it again, at the end of the line, at
// their next attempt.
//
// # Guarantees
//
//	Property             Holds                         Condition
//	mutual exclusion     yes                           etcd's Raft quorum; the drift allowance covers clock rate differences
//	fencing token        create revision of the key    strictly increasing per key, durable across leader changes and restarts
//	lost reply           recovered                     the retry uses the same owner (distlock does this)
//	lease end notified   yes (Grant.Lost)              expiry or revocation seen by the keep-alive, or its deadline passed
//	crashed holder       others wait <= its lease TTL  whole seconds, >= 1 s and etcd's minimum (2 s by default)
//	fair order           FIFO by create revision       with distlock.WithFairness, and for writers
//	read-write lock      writers queue, readers wait   a queued writer keeps new readers out
//	semaphore            first n keys                  a request of another n is refused (driver.KindError)
//	one kind per key     checked in each transaction   another family or size: driver.KindError
//	re-entrant locks     holds counted in etcd         the identity's own lease, kept alive by every backend holding it
//	fair re-entrant      first hold in turn            further holds of the identity granted at once
//	handed-over lock     outlives the first backend    a closed or crashed backend's holds end with the lease, <= its TTL after the others' last release
//	Inspect TTL          etcd's whole seconds          the longest remaining lease of the holders
//	state reclaimed      every key on a lease          none left within the lease's TTL and 10 s of the last release
//
// # Client settings
//
// [New] takes a *clientv3.Client that the caller keeps: Close stops the
// backend's keep-alives and watches, not the client. Its options are
// [WithPrefix] (the string before every key the backend writes: clients
// that share locks use the same), [WithDrift] (the clock drift allowance)
// and [WithCallTimeout] (the bound of each call). New returns no error: a
// nil client or an invalid option (a nil drift function, a nil Option)
// makes every method fail with an error wrapping driver.ErrInvalidBackend
// that names it, which package distlock reports at once; so does a
// closed backend. An "etcd://" URL (see [OpenURL]) sets the endpoints,
// the credentials, the prefix and the dial timeout; the backend it opens
// owns its client and closes it with the backend.
package etcdlock
