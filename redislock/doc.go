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
//   - Acquire: if the lock key is free, INCR the key's fencing counter and
//     SET the lock with the owner token, the token, the server's TIME and the
//     holder's host and pid, with PX ttl. If the same owner already holds it,
//     the same grant is returned again: a retry after a lost reply is
//     recognised instead of waiting for its own lock to expire. Otherwise the
//     holder's remaining TTL comes back as the retry hint.
//   - Release: compare the owner and DEL, then PUBLISH on the lock's channel.
//     The release also leaves a receipt (the owner, PX 10s) so that a
//     release sent again because its reply was lost reports the release it
//     made instead of a lock it no longer finds; an owner token names one
//     holding, so any release of it within 10s is such a repeat. A receipt
//     is one key per lock, overwritten by the next release, so a repeat
//     that comes after another holder's full acquire-and-release (within
//     the few milliseconds a repeat takes) still reports the lock lost. An
//     owner that held nothing is taken out of the fair queue instead (a
//     waiter giving up), in a second script.
//   - Refresh: compare the owner and PEXPIRE.
//
// Scripts run by EVALSHA and are loaded again on NOSCRIPT. The lock key, its
// counter and its channel share a {hash tag}, so the scripts work on Cluster
// (a name containing braces is tagged by its hash instead).
//
// Waiters share ONE pub/sub connection per Backend. A waiter subscribes
// before it re-tries, and the subscription is confirmed (by a PING answered
// on the same connection) before that re-try, so a release is never missed
// while the connection lives; after a reconnect every waiter re-tries. An
// expiry publishes nothing, so waiters also wake when the holder's TTL, as
// reported by the failed attempt, runs out.
//
// # Fair locks
//
// With distlock.WithFairness, waiters queue in a sorted set beside the lock
// (same hash slot) and the lock goes to the oldest live waiter: the fair
// acquire script grants it only to the head of the queue, the release
// message names that waiter so that only it wakes, and a waiter that gives
// up leaves the queue in one script. A waiter keeps its place by trying
// again at least every few seconds (the root package does this); one that
// vanishes is dropped when its place lapses. Every client locking a key must
// use fairness for the order to hold: a plain acquire ignores the queue.
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
// hold (with a receipt per call, kept 10s) and the last one deletes the key;
// a renewal by any hold extends the lease and its holds together, never
// below what is left while there are other holds. Re-entrant locks are not
// fair: asking for both fails with errors.ErrUnsupported.
//
// # Inspection
//
// Inspect reads the lock, then the readers and permits if the lock key is
// free, and warns when the server's maxmemory-policy lets it evict keys
// (every policy but noeviction, once maxmemory is set): an evicted lock key
// lets a second holder in. Servers that refuse CONFIG GET get no warning.
//
// # Read-write locks
//
// Client.RWMutex keeps its writer in the lock key, as a plain lock, and its
// readers in a sorted set by lease expiry beside it. A writer kept out by
// readers leaves a short-lived claim that makes new readers wait, so a
// steady stream of readers cannot starve it; a writer that gives up
// withdraws the claim. Each side is one script per operation.
//
// # Guarantees
//
//	deployment              mutual exclusion while the lease lasts           fencing tokens
//	----------------------  -----------------------------------------------  ------------------------------------
//	standalone              yes, while the server runs                        increase, unless the server restarts
//	                                                                          without persistence (counter lost)
//	standalone, AOF          survives restarts with appendfsync always        increase across restarts
//	  appendfsync always
//	Sentinel                yes, except across a failover to a replica that   may repeat after such a failover
//	                        had not received the lock (asynchronous
//	                        replication)
//	Sentinel + WithReplicas failover window narrowed: the lock reached n      as for the lock
//	                        replicas before Acquire returned (not a
//	                        consensus guarantee)
//	Cluster                 as Sentinel, per shard                            as Sentinel
//
// In every row the holder learns of a lost lease no later than
// Lock.ValidUntil (Done closes), and a resource that checks fencing tokens
// rejects a stale holder. The counter key never expires: one small key per
// lock name is the price of tokens that do not go backwards. For tokens that
// must never repeat even across failovers, make the protected resource
// remember the highest token it accepted (package fence) and use persistence
// with WithReplicas, or use redlock with delayed restarts.
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
package redislock
