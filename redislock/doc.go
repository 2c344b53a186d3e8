// Package redislock is the distlock backend for one Redis deployment: a
// standalone server, a master watched by Sentinel, or a Redis Cluster, through
// any go-redis v9 client (redis.UniversalClient).
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//	c := distlock.New(redislock.New(rdb))
//	l, err := c.Mutex("orders:42").Lock(ctx)
//
// # How it works
//
// Each operation is one Lua script, so one round trip, atomic on the server:
//
//   - Acquire: if the lock key is free, and no readers or permits hold the
//     key (see Kinds), issue the next fencing token (the
//     key's counter plus one, or the server's clock in µs if that is
//     higher; see below) and SET the lock with the owner token, the token,
//     the server's TIME and the holder's host and pid, with PX ttl. If the same owner already holds it,
//     the same grant is returned again: a retry after a lost reply is
//     recognised instead of waiting for its own lock to expire. Otherwise the
//     holder's remaining TTL comes back as the retry hint, and the lease is
//     marked as waited for.
//   - Release: compare the owner and overwrite the lease with a small free
//     record (PX 10s), then PUBLISH on the lock's channel if the lease is
//     marked: a lease nobody was refused by wakes nobody. (A waiter
//     subscribes before it tries again, so the lease that refuses that try
//     is one it will hear released.) The free record is the release's
//     receipt (the owner) and the released lease's token: a release sent
//     again because its reply was lost reports the release it made instead
//     of a lock it no longer finds; an owner token names one holding, so
//     any release of it found there is such a repeat. The next grant
//     carries the receipt on in its lease (a digest of it), so a repeat
//     still reports its release while another holder has the lock; the
//     next release replaces it, so a repeat that comes after another
//     holder's full acquire-and-release (within the few milliseconds a
//     repeat takes) still reports the lock lost. An owner that held
//     nothing is taken out of the fair queue instead (a waiter giving up),
//     in a second script.
//   - Refresh: compare the owner and PEXPIRE (with [WithReplicas], then
//     WAIT, on the same connection).
//
// Scripts run by EVALSHA and are loaded again on NOSCRIPT. The lock key, its
// counter and its channel share a {hash tag}, so the scripts work on Cluster
// (a name containing braces is tagged by its hash instead).
//
// Waiters share ONE pub/sub connection per Backend. A waiter subscribes
// before it re-tries, and the subscription is confirmed (by a PING answered
// on the same connection) before that re-try, so a release is never missed
// while the connection lives; after a reconnect every waiter re-tries. A
// waiter whose client already had the lock's subscription confirmed before
// its attempt skips that re-try, unless the channel carried a message (or
// the connection broke) since: each channel's messages are counted, so the
// waiter knows whether a release may have gone past before its watch. An
// expiry publishes nothing, so waiters also wake when the holder's TTL, as
// reported by the failed attempt, runs out.
//
// A plain lock's release wakes one client, not every waiter (no herd): a
// refused attempt of a client whose subscription to the lock is live
// enlists the client in a sorted set beside the lock (":waiters", same
// hash slot, scored by the holder's token so the oldest comes first, gone
// a few seconds after the last lease), and the release takes the client
// enlisted first out of it and names it in its message; the other clients
// keep sleeping. A client named with no waiter left (it gave up, or took
// the lock meanwhile) passes the wake-up on to the next, in one script; a
// client that vanished costs the others a wait of at most their safety
// poll (distlock.WithSafetyPoll) or the holder's TTL. A waiter woken by
// name marks the lease it takes as waited for, so its release wakes the
// next (in a handoff the releaser has enlisted itself by then). A client
// that releases the lock and wakes another client yields to it for 20 ms,
// or until the lock's channel next brings it a message: the release tells
// it to, and while it hears the lock's releases, its own attempts only
// enlist it and are refused, in one round trip that reads nothing, so that
// a worker that asks again at once does not take the lock back before the
// woken waiter can ask. The release of a lease that only plain attempts
// waited for does not look at the fair queue (a fair attempt marks the
// lease for it). Writers' releases, semaphores and Redlock still wake
// every waiter.
//
// # Fair locks
//
// With distlock.WithFairness, waiters queue in a sorted set beside the lock
// (same hash slot) and the lock goes to the oldest live waiter: the fair
// acquire script grants it only to the head of the queue, and a waiter
// that gives up leaves the queue in one script. The release hands the lock
// over: in the same script it grants it to the oldest live waiter and
// publishes the grant, so that only that waiter wakes, and it holds the
// lock without another request. It counts its lease from its own last
// attempt (the grant came after it), and the handed-over lease lasts as
// long as the waiter's place in line, not the full TTL, until its first
// renewal: a waiter that vanished in line holds the lock up no longer than
// its place would have lasted. With [WithReplicas] there is no hand-over
// (a grant must wait for the replicas); the release names the waiter whose
// turn it is instead. A waiter keeps its place by trying
// again at least every few seconds (the root package does this); one that
// vanishes is dropped when its place lapses. Every client locking a key must
// use fairness for the order to hold: a plain acquire ignores the queue.
//
// A re-entrant mutex may be fair: its first hold waits its turn in the
// queue like any fair waiter, and while its lease holds the lock, further
// holds of the same identity are granted at once, whoever waits in line.
// Its turn comes by message, not by hand-over (a handed-over grant is a
// plain lease), so it costs one more round trip.
//
// # Semaphores
//
// Client.Semaphore(key, n) keeps its holders in a sorted set by lease
// expiry, with their fencing tokens in a hash beside it (same hash slot).
// Taking, giving back and renewing a permit is one script each; expired
// permits are dropped by the next script that looks, and a release wakes
// waiters as for a lock. A permit's release leaves a receipt per owner (a
// sorted set beside the permits, entries kept 10s), so that, as for a
// lock, a release sent again after a lost reply reports what it did.
//
// # Re-entrant locks
//
// A mutex locked with a distlock.OwnerID is a re-entrant lease. Its lock
// key holds the identity's digest, marked so that no owner's
// compare-and-delete matches it, and a hash beside it (same hash slot, same
// TTL) holds the owners of its holds. A separate script takes it or adds a
// hold, with the lease's token, and with the restart guard and clock-floored
// tokens of a plain lock; a repeat after a lost reply finds its hold and adds
// none. Release and Refresh look at the holds only when the owner is not
// the lock key's, so plain locks cost what they did: a release removes one
// hold (with a receipt per call, kept 10s) and the last one frees the key;
// a renewal by any hold extends the lease and its holds together, never
// below what is left while there are other holds. Re-entrant locks may be
// fair (see Fair locks).
//
// # Kinds
//
// A key is one kind of lock at a time, while any holding of it lives: a
// mutex (plain, fair or re-entrant), a read-write lock, or a semaphore of
// one size. Each acquire script looks for live holdings of the other
// families before it grants or queues (one EXISTS on the readers and
// permits for a mutex; the lock key for readers and permits), and refuses
// a request of another family, or for a semaphore of another size, with a
// *driver.KindError that names both: distlock then fails the call at once,
// wrapping driver.ErrKindMismatch, instead of waiting. A writer's lease is
// marked as such in its value by the script, so a mutex and a writer tell
// each other apart; a semaphore keeps its size in its token hash, which
// Inspect reports (driver.Info.Limit). Once the last holding ends, the key
// may be used as another kind.
//
// # Inspection
//
// Inspect reads the lock, then the readers and permits if the lock key is
// free. Its Warnings say, in one line, how the servers' configuration puts
// locks at risk: a maxmemory-policy that may evict keys (allkeys-*: lock
// keys and fencing counters; volatile-*: lock keys), and no append-only
// file (a restart loses the locks held). It reads them from INFO memory
// and INFO persistence, at most once a minute per Backend, never on the
// path of an acquisition; a server that does not answer gets no warning.
// A second line says when the restart guard holds the key back, and for
// how long. distlock status prints both.
//
// # Read-write locks
//
// Client.RWMutex keeps its writer in the lock key, as a plain lock, and its
// readers in a sorted set by lease expiry beside it. A writer kept out by
// readers leaves a short-lived claim that makes new readers wait, so a
// steady stream of readers cannot starve it; a writer that gives up
// withdraws the claim. Each side is one script per operation.
//
// # Fencing tokens
//
// A grant's token is max(last + 1, server clock in µs), where last is the
// highest token the key's records keep: the lock key (the lease, or the
// free record its release left) and the counter, read in one command by
// the same script: no extra round trip. The lease keeps its token while it
// lives and the free record for 10s after its release; the counter is
// written only for a token that ran ahead of the clock floor (a burst of
// grants, a written-back token, a clock set back), which the floor would
// not pass before the lease ends, so an uncontended acquire and release
// cost seven server commands (EVALSHA, MGET, TIME and SET; EVALSHA, GET
// and SET). While the records last, each grant's token
// is above the last. When they are lost — a restart without persistence, FLUSHALL, an eviction under an
// allkeys-* policy, a failover to a replica that had not received the last
// grants, a restart from an older snapshot — the next token comes from the
// clock of the server that grants it, and is above every token issued
// before the loss if that server's clock is not behind the clock that
// issued them by more than the loss took: a restart or a failover takes
// seconds, NTP keeps clocks within milliseconds. A clock set back by hand,
// or a server restored from a VM snapshot with its old clock, breaks this.
// (It also needs fewer grants of one key than one per µs, which Redis
// cannot serve.) Tokens are µs since 1970, about 1.8e15: exact in the
// scripts' Lua numbers (up to 2^53, the year 2255), in uint64 and in a
// SQL BIGINT.
//
// # The restart guard
//
// A server that restarts without its data forgets the locks it granted,
// while their holders may still be inside their leases. So a grant of a
// key that has no fencing counter — a key new to the server, or one whose
// data it lost — is refused while the server has run for less than the
// maximum lease length ([WithMaxTTL], default [DefaultMaxTTL]), with the
// time left as the retry hint: Lock waits, TryLock reports ErrNotObtained.
// Once the server has run that long, every lease granted before its start
// has ended, since no lease is longer than the maximum: longer TTLs fail
// at once. The check runs only when the counter is missing, inside the
// same script (it reads INFO server), so it costs the common path nothing.
// A user whose ACL forbids INFO gets an error wrapping
// distlock.ErrInvalidBackend on such keys: grant it +info, or turn the
// guard off where the servers never lose data.
//
// A brand-new server looks like one that lost its data, and would hold new
// keys back too. It stops once the server has run for the maximum lease
// length, or at once after [Backend.DeclareFresh], which records, in the
// server's data, that its current life (its run id) follows no loss: call
// it after starting brand-new servers, or servers known to have kept their
// data. A restart ends the declaration. The record is one key per prefix
// ("distlock:guard"), or one per hash slot on Cluster (DeclareFresh
// writes 16384).
//
// The cost: after a restart, new keys — and, without persistence, all
// keys — wait until the server has run for the maximum lease length (a
// second more, as uptime is read in whole seconds). Keys whose counter
// survived (and had not expired: see Guarantees) are not held back. On
// servers that put every write on disk before answering it (appendonly
// yes, appendfsync always), [WithDurableServers] removes that cost: a
// server that loaded the marker of an earlier life back from its
// append-only file lost nothing, and grants new keys at once.
// [WithoutRestartGuard] turns the guard off.
//
// The guard does not cover: FLUSHALL or evictions on a server that has run
// longer than the maximum lease; a failover (a promoted replica has not
// restarted, see below); a partial loss (appendfsync everysec, an older
// snapshot) that leaves a key's counter in place; a server clock that jumps
// forward, which shortens the guard as it shortens every TTL.
//
// # Failover
//
// Replication is asynchronous: a replica promoted by Sentinel or Cluster
// may lack the last grants and renewals. [WithReplicas](n, timeout) sends
// WAIT n after each acquisition of a mutex (fair or not) and after each of
// its renewals, on the same connection. An acquisition that fewer than n
// replicas confirm is released and fails with [ErrNotReplicated]; such a
// renewal fails, and the lease keeps the deadline of the last confirmed
// one. So a grant or renewal reported to the caller had reached n replicas,
// and a failover to one of them that kept its data keeps the lock at least
// until the ValidUntil the holder was given.
//
// It does not close the rest: Sentinel may promote a replica that did not
// confirm (with more replicas than n, or one that fell behind since). It
// does so even in a failover asked for while the old master runs: the
// promoted replica stops following the old master, which grants on, and
// its other replicas, still following it, confirm those grants. Only n
// equal to the number of replicas keeps such grants from counting (then
// nothing is granted while a replica is missing); `distlock torture
// --servers sentinel-one` shows the loss with one replica of two. A
// replica that confirmed loses the write if it restarts without
// persistence before the failover; and for the moment between the grant
// and a failed WAIT, the lock is held on the master. Read-write locks and
// semaphores do not wait. Fencing tokens stay above the lost ones on the
// terms of the section on tokens, so a resource that checks them refuses
// the holder whose lock the failover lost, once the new holder has
// written.
//
// Releases are not waited for: a failover to a replica that had not yet
// received a release brings the released lock back, held by its former
// owner, until its TTL runs out. That costs availability (the key is
// locked out for up to one TTL), not exclusion, so Unlock does not pay a
// WAIT for it; and a release that too few replicas confirmed could not be
// undone anyway.
//
// A grant given back because too few replicas confirmed it is named by its
// token (and, for a hold of a re-entrant lease, by a call id whose receipt
// its first run leaves), so a give-back that arrives late cannot end the
// grant the owner's retry took; until the give-back is known to have run,
// the owner's next attempt sends it again first.
//
// # Guarantees
//
// Each row says what holds and what must be true for it.
//
//	guarantee                  deployment   what must be true
//	-------------------------  -----------  -------------------------------------------------------
//	one holder at a time       all          the server keeps each lock key until its TTL ends:
//	                                        maxmemory-policy noeviction (or no memory pressure),
//	                                        no FLUSHALL, no forward jump of the server's clock
//	  across a restart         all          appendonly yes with appendfsync always; or the
//	                                        restart guard (default), no client's TTL above the
//	                                        maximum lease, and no DeclareFresh after a loss
//	  across a failover        Sentinel,    the promoted replica had the grant and its renewals:
//	                           Cluster      likely with WithReplicas, not promised (Failover)
//	tokens increase            all          the key's counter survives; or, when it is lost, the
//	                                        clock of the server that grants next is not behind
//	                                        the one that issued the lost tokens by more than the
//	                                        loss took
//	lost lease known by        all          the client's and the server's clocks advance at rates
//	  ValidUntil (Done)                     within the drift allowance (WithDrift)
//
// Every key a lock leaves behind expires: the lock with its lease, or its
// free record 10s after its release, the receipts of permits, readers and
// holds after 10s, a fair queue one place's length after its
// last waiter, a semaphore's or readers' sets with their last lease. The
// counter, when written, lasts 10s after the key's last grant, and longer
// when it ran ahead of the server clock (a written-back token, a burst of
// grants), until the clock floor has passed it: a token issued after it expired
// comes from the floor and is still above every earlier one, on the terms
// above. So a key nobody holds or waits for leaves nothing after about
// 10s; the cost is that a server clock set back by more than the time
// since a key's last grant (plus those 10s) gives that key lower tokens.
// A resource that checks tokens
// (package fence) refuses a holder whose lease ended, whichever row's
// condition failed, as long as tokens increase; where even that could fail
// (a clock set back), it can also compare holders (fence's Holder helpers)
// and refuse a second holder with an equal token.
//
// # Client settings
//
// Give the go-redis client these settings (clients opened from a URL have
// them):
//
//	ContextTimeoutEnabled: true // a call ends at its context's deadline
//	MaxRetries:            -1   // no retries inside the client
//	DialerRetries:         1    // one dial per connection attempt
//
// Without ContextTimeoutEnabled, a server that stops answering holds a call
// for the client's ReadTimeout (5s), whatever the context says. With
// go-redis' default retries, a call against a server that is down retries
// each dial five times, 100ms apart, and the command up to three times with
// backoff; when the context ends during such a backoff the error is only
// "context deadline exceeded", and the cause ("connection refused") is lost.
// distlock retries on its own terms (Lock waits with backoff, the watchdog
// renews until the lease's deadline), so the client need not: with these
// settings each call fails with its real cause — "connection refused",
// "i/o timeout" for a server that does not answer, WRONGPASS — and within
// its deadline. A call whose connection breaks before its reply (EOF, reset)
// is still sent once more by the backend, on a fresh connection: every
// script is safe to repeat (acquisitions per owner, releases per call).
//
// Over rediss://, the TLS handshake is bound to the call's context, and a
// server that answers in plain text is reported as such within about 200ms
// rather than at the deadline.
//
// The lease's deadline does not depend on any of this: the watchdog ends
// the lease on time even while a renewal call hangs.
//
// [New] returns no error: a nil client or an invalid option (a nil
// Option, WithDrift(nil), a WithReplicas count below 0 or without a
// timeout, a Cluster prefix that would split a lock's keys over slots)
// makes every method fail with an error wrapping driver.ErrInvalidBackend
// that names it, which package distlock reports at once; a WithMaxTTL that
// is not positive does so for every acquisition and renewal.
package redislock
