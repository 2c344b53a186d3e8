// Package redlock is the distlock backend for N independent Redis masters:
// the Redlock algorithm, with fencing tokens that keep increasing when the
// quorum changes between holders.
//
//	var clients []redis.UniversalClient
//	for _, addr := range []string{"r1:6379", "r2:6379", "r3:6379", "r4:6379", "r5:6379"} {
//		clients = append(clients, redis.NewClient(&redis.Options{
//			Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
//		}))
//	}
//	c := distlock.New(redlock.New(clients))
//	l, err := c.Mutex("orders:42").Lock(ctx)
//
// or distlock.Open(ctx, "redlock://r1:6379,r2:6379,r3:6379,r4:6379,r5:6379").
//
// The masters must be independent: no replication between them, no shared
// host or disk. Each runs the same one-round-trip scripts as package
// redislock, so a node is exactly a redislock deployment.
//
// # How it works
//
// Acquire sends the acquire script to every master at once, each with a
// per-node timeout (see [DefaultNodeTimeout]: a quarter of the TTL, at most
// 1s, sized for loaded machines).
// It succeeds if a quorum, N/2+1, granted the lock and the lease is still
// valid:
//
//	validity = TTL - elapsed - drift,   drift = TTL/100 + 2ms (see WithDrift)
//
// where elapsed is measured on the client's monotonic clock from the start
// of the attempt (of its last round, see below). The lease then ends
// locally at start + TTL - drift, counted from the start of the call:
// Lock's Done closes there unless a renewal moved it.
//
// A successful Acquire waits for every node, up to the timeout, so that an
// Unlock right after it cannot overtake a grant still on its way. A failing
// one stops as soon as the replies so far decide it, releases the lock on
// every node that granted it, failed or did not answer (a lost reply may
// hide a grant), and then:
//
//   - if one other owner holds the lock on a quorum of the nodes, it
//     reports the lock not obtained: it is held elsewhere, and distlock
//     waits for its release. (When the refusing nodes are too many for a
//     quorum without them, they are asked who holds the lock: one more
//     round trip, on this path only.)
//   - if the restart guard (see below) holds new grants back on too many
//     nodes for any quorum, it reports the lock not obtained and Guarded:
//     distlock says so (distlock.ErrRestartGuard), and how long until
//     enough of them grant;
//   - if nodes refused but nobody can be shown to hold a quorum — a split
//     vote between contenders that each won a minority — it tries again
//     within the same call, as described below;
//   - if a quorum refused the request for the key's kind (the key is held
//     on them as another kind of lock, by a client of package redislock),
//     it returns a [*driver.KindError];
//   - if too many nodes failed for a quorum, whatever the others said, it
//     returns a [*QuorumError] naming each node and what it answered.
//
// Refresh extends the lease on every master and needs a quorum, with the
// validity computed as for Acquire. It returns once a quorum confirmed, but
// its requests to the other masters run on, detached from the caller's
// context and bounded by the node timeout, so that a renewal reaches every
// master that answers in time. Nodes that lost the key meanwhile get it
// back.
//
// Release deletes the lock on every master and waits for each as long as
// its context allows, up to a second per call: it spends no lease, and a
// master that stalls for a moment must not keep the key until its TTL
// ends. It succeeds once a quorum released the lock and no master is in
// doubt (each released it, did not hold it, or failed with an error of its
// own, as a dead master does); a master still silent when the wait ends
// makes it a [*QuorumError], and a repeated Release (distlock repeats it
// within its release timeout) settles it. A node asked again
// because its reply was lost (go-redis' retries, the backend's one resend
// when the connection broke, or a repeated Release) reports the release it
// made, from a receipt the first request left, so a lost reply does not
// turn a release into a missed quorum or a lost lease. Waiters subscribe on
// every master and wake when any of them publishes a release, once per
// release: the message names the released lease's token. At the key's
// gate node (see below) a refused attempt enlists its client, and the
// release there wakes the client enlisted first, by name, not every
// waiter; the releasing client yields to it for 20ms (its own attempts at
// the gate are refused meanwhile), so that a worker that asks again at
// once does not take the lock back before the woken one can ask. An
// enlisted waiter is timed only by the gate's fallback (below). A waiter
// whose subscriptions were live before its attempt, and have heard
// nothing since, sleeps at once after subscribing instead of trying
// again (driver.MarkWatcher).
//
// When contenders ask at the same moment, the requests reach the nodes in
// different orders, and the vote can split so that nobody wins a quorum
// (with three or more contenders, or with failed nodes). An attempt that
// wins only a minority gives it back without waking anybody and tries
// again after a random pause (randomised exponential back-off: half an
// attempt plus up to two attempts' length, the window doubling each round
// up to 32 attempts), up to 8 rounds within the call and within its
// context. The first contender to try again alone takes every node, and
// the others find the lock held. So TryLock fails only when the lock is
// held elsewhere, or when the vote split in every round. Waiters woken
// together by a release would split the vote most: a waiter woken by a
// release first asks one node chosen by the key's hash (the gate), and the
// others only if the gate grants it. The gate orders the contenders but
// decides nothing: the lock is the quorum's, an error at the gate falls
// back to asking every node, and so does a waiter that heard no release
// for a while after the gate refused it.
//
// A request whose reply was lost may still run later. A late release of a
// failed attempt could then delete a grant that the same owner's next
// attempt counted, leaving it a node short of the quorum it believes it
// has. So the owner does not count that node again until a later release
// there has been answered.
//
// # Timing assumptions
//
// Mutual exclusion holds if, over one lease, the clocks of the client and of
// the masters advance at rates that differ by less than the drift allowance,
// and if a master does not forget a lock it granted before that lock expires
// (for restarts, the restart guard sees to it: see below). Network delays and the client's own pauses are
// allowed: they come off the validity, and a lease whose validity ran out is
// over whether or not its holder noticed.
//
// # Fencing tokens
//
// Each master keeps a counter per key and gives a fresh grant the token
// max(counter + 1, its clock in µs rounded down to [TokenGrain], 100ms).
// The counter is the highest token the key's records keep: the lease, the
// free record its release leaves (for 10s), and a separate counter key,
// which a grant writes only when its lease might end before the clock
// floor passes its token (a TTL under a grain, or a token that ran a grain
// ahead of the floor). A renewal never cuts a lease on a master below a
// grain and 2ms, so that the lease keeps its token that long; the
// validity still counts the TTL asked for. The rounding lets masters
// whose clocks differ by a little issue the same token when the clock
// moves their counters on.
// Per-node counters alone do not order holders, since two holders'
// quorums may share a single node. The token of a holding is therefore the
// largest token among the nodes that granted it. When those nodes disagree,
// it is first written back to every node (the seed script: raise the counter
// to at least the token), and a quorum of the granting nodes must confirm
// before Acquire returns; this also brings lagging counters up to date.
// When they agree — counters in sync, the usual case — no second round trip
// is needed.
//
// Claim: if holding A got token a, every holding B that comes after it, in
// the sense that on each node B's lock key was created after A's was gone,
// gets a token b > a.
//
// Proof. Let Q be the granting nodes that returned a (no write-back) or
// confirmed it (write-back). |Q| >= N/2+1, and on each node of Q the counter
// reached a while A's lock key was on that node: by the increment that
// created the key, or by a write-back confirmed before Acquire returned,
// within A's lease. A node issues a token only when it creates a lock key,
// and only where there is none; counters never decrease. So on a node of Q
// every key created after A's is gone gets a token above a. B was granted
// by a quorum P, and any two quorums intersect: take j in P and Q. B's key
// on j was created after A's was gone, so its token exceeds a, and b, the
// largest of B's tokens, does too. ∎
//
// A node that got the write-back without granting cannot vouch for a: a key
// of a later holder may already sit there with an older token, to be
// granted again on that holder's next attempt. That is why only granting
// nodes count.
//
// The proof needs counters that never go backwards. A master loses them
// when it restarts without its data, when it is flushed, when a counter is
// evicted (counters have no TTL: an allkeys-* policy can evict them), or
// when a lagging replica or an older file takes its place. Its next token
// then comes from its clock, rounded down to TokenGrain: above every token
// issued before the loss if its clock is not behind the clocks that issued
// them (write-backs carry tokens from one master to another) by more than
// the loss took, less TokenGrain. A restart without data meets this by
// far under the restart guard, which holds the master's new grants back
// for at least a second; a flush, an eviction or an older file followed
// by a grant on the same master within 100ms may not, unless the next
// quorum meets a master that kept its counter. appendonly yes with
// appendfsync always, and noeviction, keep the counters themselves.
//
// # Re-entrant locks
//
// A mutex locked with a distlock.OwnerID is a re-entrant lease on each
// master, as in package redislock: the lock key names the identity, a hash
// beside it the owners of its holds. A nested hold is acquired like a
// lock, from a quorum, and each granting master reports the lease's token.
// The write-back of a disagreeing first grant raises that stored token
// too, so nested holds report the token the first hold was given. Two
// limits under faults: a master that lost the lease and grants a nested
// hold as a new lease there issues a newer token, which the hold then
// carries (tokens still only go up); and a renewal that puts the key back
// on a master that lost it does so as a plain lock of the renewing hold,
// which the other holds do not share (their quorum is the other masters).
//
// # Known critiques, and what distlock does
//
// Process pauses and delays (Kleppmann, "How to do distributed locking",
// 2016): a holder can stop (a GC pause, a stalled VM, a slow network) and
// resume after its lease expired and another holder took over, then write
// as if it still held the lock. No lease can prevent that. distlock closes
// Lock.Done and cancels Lock.Context at the local validity deadline, even
// while a renewal hangs, and every holding carries a fencing token that the
// protected resource can check, rejecting a stale holder (package fence).
//
// Clock jumps: Redlock's safety rests on bounded clock drift, not on
// synchronised clocks (antirez, "Is Redlock safe?", 2016). The client
// measures on Go's monotonic clock, so a jump of its wall clock changes
// nothing. A master whose wall clock jumps forward expires keys early and
// can let a second holder in; run NTP in slewing mode (no steps after
// boot). The drift allowance covers rate differences, not jumps; fencing
// tokens cover what slips through, since an early expiry does not reset a
// counter.
//
// Restarts without persistence: a master that restarts empty forgets the
// locks it granted, and with the holder's other nodes it could form a
// quorum for a second holder (one restart of 3 or 5 nodes is enough). The
// restart guard, on by default, is the delayed restart done by the
// masters themselves: a master grants no key that has no fencing counter
// until it has run for the maximum lease length ([WithMaxTTL], default
// [DefaultMaxTTL]; longer TTLs fail at once), by which time every lock it
// knew has expired. It reads its uptime and run id (INFO server) inside the
// acquire script, only when the counter is missing: no extra round trip.
// The cost is that a restarted master helps no new quorum for that long,
// and that brand-new masters hold new keys back too, until they have run
// that long or [Backend.DeclareFresh] declares them new. Refresh re-takes
// the lock on a master that lost it once the guard lets it.
// [WithDurableServers] removes the wait after a restart on masters that put
// every write on disk before answering it (appendonly yes, appendfsync
// always) and load the guard's marker back from their append-only file.
// [WithoutRestartGuard] turns the guard off; then persist every write
// (appendonly yes, appendfsync always) or keep a restarted master out for
// longer than the longest TTL by other means.
//
// # Guarantees
//
// Each row says what holds and what must be true for it.
//
//	guarantee                 what must be true
//	------------------------  ------------------------------------------------------------
//	one holder at a time      over one lease, the clocks of the client and the masters
//	                          advance at rates within the drift allowance, and no master's
//	                          clock jumps forward; the masters keep the lock keys they
//	                          granted until their TTLs end (noeviction, no FLUSHALL); a
//	                          master that restarts without its data is held back by the
//	                          restart guard (default: no client's TTL above the maximum,
//	                          no DeclareFresh after a loss) or persists every write
//	tokens increase           each master's counters survive; or a master that lost one
//	                          grants next only after the loss plus TokenGrain by the
//	                          clocks that issued the lost tokens; or the next quorum
//	                          meets a master that kept the counter
//	lost lease known by       the client's and the masters' clocks advance at rates
//	  ValidUntil (Done)       within the drift allowance (WithDrift)
//
// Redlock is not a consensus protocol. Where a lost lock must never let two
// writers through, make the resource check fencing tokens, or use a
// backend built on consensus.
//
// # Choosing N
//
// Use an odd number of masters. N tolerates (N-1)/2 failed masters: 3
// tolerate 1, 5 tolerate 2. An even N tolerates no more than N-1 (6
// tolerate 2, like 5) and needs one more master up for a quorum.
//
// # Client settings
//
// [New] takes one go-redis client per master, which the caller keeps, set
// up as its documentation says (ContextTimeoutEnabled, MaxRetries -1,
// DialerRetries 1); clients opened from a "redlock://" URL (see
// [OpenURL]) are set up so and closed with the backend. New returns no
// error: no clients, a nil client, two clients of one master, or an
// invalid option (a nil Option, WithDrift(nil), a WithNodeTimeout that
// is not positive) makes every method fail with an error wrapping
// driver.ErrInvalidBackend that names it, which package distlock reports
// at once; a WithMaxTTL that is not positive does so for every
// acquisition and renewal.
package redlock
