// Package memlock is an in-process distlock backend. Locks live in memory
// and are shared by every client of one [Backend] value, so it coordinates
// goroutines of one process only.
//
// It implements the whole driver contract — TTL expiry on the monotonic
// clock, fencing tokens, notified waiting that wakes fair waiters in turn,
// fair locks, read-write locks, semaphores, re-entrant locks, inspection —
// and passes the conformance suite, which makes it the reference backend,
// the one the examples use, and a fast stand-in for a real backend in unit
// tests of code that takes locks.
//
// # How it works
//
// A Backend keeps, under one mutex, a state per key that has holders,
// waiters or a writer's claim: one set of holds whatever the kind (a lock
// and its re-entrant holds, the readers, or the permits, by owner), the
// key's kind and semaphore size while it is held, the fair waiters' places
// in line, first come first, and the claim of a writer waiting for the
// readers to leave. Every call that looks at a key settles it afterwards:
// it drops the holds, places and claim that lapsed, wakes the key's
// watches if that freed something (with fair waiters in line, only the
// first of them), sets the key's timer for its next lapse, and forgets a
// key left empty. A lease that lapses with nobody calling is dropped by
// that timer, which wakes the waiters as a release would. A release leaves
// a receipt for 10s, so that a repeated release reports success; a freed
// key's last token is kept as long, for Inspect. A key nobody holds or
// waits for leaves nothing after that ([Backend.Stored] lists what is
// kept).
//
// # Fencing tokens
//
// One counter per Backend, for every key, issues the tokens: each new
// lease takes the next value, so a key's tokens increase even after its
// state was forgotten. Re-entrant holds share their lease's token. The
// counter lives as long as the Backend value: a new Backend starts again
// from 1, as a store that lost its data would.
//
// # Re-entrant locks
//
// The holds of a re-entrant identity are counted here, in the key's state,
// one hold per owner: a request with the identity of the mutex's holders
// is granted at once as one more hold with their token, even when fair
// waiters are in line. The holds share one lease: refreshing any renews it
// for all, it is never shortened while it has more than one hold, and it
// ends when its last hold is released or when it lapses.
//
// # Guarantees
//
// Mutual exclusion holds between the clients of one Backend value, in one
// process; nothing is excluded across processes, and nothing survives the
// process. Leases are measured on the monotonic clock of that process, so
// the validity a grant reports is its TTL, with no drift to allow for.
// Fencing tokens strictly increase per key for the life of the Backend.
// Every method answers at once: no reply is ever lost, so no outcome is
// ever unknown.
//
// # Client settings
//
// memlock has no client: [New] or the zero Backend is ready to use, and
// "mem://name" in distlock.Open names a store shared by every client that
// opens the same URL in this process. [WithMaxTTL] makes it refuse leases
// longer than a maximum, as the Redis backends do; an invalid option makes
// every method fail with an error wrapping driver.ErrInvalidBackend, which
// distlock reports at once. [Backend.Expire] ends a holding as if its
// lease had lapsed, for tests of code that must survive losing a lock.
package memlock
