// Package zklock is a distlock backend on ZooKeeper (3.5 or newer),
// over github.com/go-zookeeper/zk: locks held by a client session and
// ordered by the ensemble's log, in the way of Apache Curator's recipes.
//
//	conn, _, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second)
//	...
//	client := distlock.New(zklock.New(conn, 10*time.Second))
//
// or distlock.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/distlock").
//
// # How it works
//
// A key (1 to driver.MaxKeyLen bytes, any bytes) is a node under the
// root (default [DefaultRoot]; the key's bytes other than letters, digits,
// '_', ':' and '-' are escaped as %XX, so every key makes a valid znode
// name), whose
// child "line" holds the key's holders and waiters. Each holding and each
// waiter is an ephemeral sequential child of the line (re-entrant leases
// aside: see below), named kind-hash-sequence, where
// the kind is x (mutex), w (writer), r (reader) or sN (a permit of a
// semaphore of N), and the hash names the owner token (a hash, because
// whoever knows a token can release its lock). The lowest sequence holds a
// mutex or write lock; readers hold while no writer is ahead of them; the
// n lowest permits hold a semaphore of n.
//
// # One key, one kind
//
// A key is used one way at a time: as a mutex (re-entrant or not), as a
// read-write lock, or as a semaphore of one size. Every attempt lists the
// line, and the names say how the nodes in it use the key: an attempt
// that finds a node of another family (or a semaphore of another size)
// ahead of its own is refused with a *driver.KindError, and deletes its
// node, whether it would have waited or not. A mutex and a writer are of
// different families. Of two attempts of different kinds made at once,
// the node made first wins: the later one sees it and is refused, and
// the earlier one sees nothing foreign ahead of it. A foreign node whose
// lease lapsed is cleared first, as any node in the way. A waiter keeping
// its place in line counts as a use of the key, as a holder does.
//
// A waiter of a mutex keeps its place in line while its Lock waits,
// fair or plain: it keeps its node between attempts and watches only the
// node just ahead of it, so a release wakes the next waiter, never the
// herd, and a holder that asks again at once queues behind the waiters.
// A writer keeps its place too, among writers, and holds new readers
// off, but every release wakes it. A fair Lock (see distlock.WithFairness) keeps its
// place from its first attempt. A plain Lock keeps one from the attempt
// after it subscribed to the key's releases, which is made at once after
// its first refusal: the backend cannot tell a plain Lock's first attempt
// from a TryLock's, which must leave nothing in the line. So "plain"
// still means no promise of order: a plain waiter whose first attempt
// lost the race joins the line behind the waiters already in it, and may
// be overtaken while it joins. Its place lasts the lease (3s at least)
// unrenewed; its Lock removes it when it returns without the lock.
// Readers and a semaphore's permits keep no place: a release wakes all
// of them (they watch the holder's node, or while readers or permits
// hold the key, the nodes leaving the line), and whichever retries first
// gets in. An attempt that keeps no place (TryLock too) removes its node
// when refused, and the retries of a refused reader or permit look at the
// line before making a node, and make one only when it would get in; so
// does a mutex attempt that keeps no place while the client found others
// in the key's line within the last second (after a sync, so that a
// release made before it began is seen). A waiter that gives up deletes
// its node.
//
// # Round trips
//
// An acquisition creates its node in a transaction that also writes the
// line's own data, whose stat gives the creation zxid (the token), the
// leader's clock (the lease's start) and the number of children: a node
// alone in its line holds the lock at once, in that one round trip.
// Otherwise the attempt lists the line. A release of a mutex or a write
// lock deletes the node and records its token as the key's last in one
// transaction; a reader or a permit, which may leave after a later
// holding, reads the last token first. So the uncontended Lock and
// Unlock are a round trip each, as the bare create and delete of a node.
//
// A waiter whose watch reports that the one node ahead of it left is
// first: its listing showed every node made before its own, and nodes
// made since are behind it. When the node that left was not the only one
// ahead, the watch lists the line before it wakes the waiter: a node
// ahead may have left without holding the lock (it gave up, lapsed, or
// its session expired), and only a listing tells whether others are
// still ahead; one that shows the waiter first marks it first. Either
// way its next attempt takes the lock without a round trip, with the
// lease left of its place, counted from its last write (its Lock renews
// it, writing the lease and marking the node held). It declines, and
// writes and lists as usual, if less than half the place is left or the
// session changed since. So a hand-off costs the release, the
// notification and at most one read. The first node of a mutex or a
// writer holds the lock, marked held or not yet: Inspect and Break count
// it.
//
// A waiter's node is made as a holding, in case it gets in at once, and
// carries the length of its place: other clients judge a node that is
// not first by the shorter of its lease and its place, so a waiter needs
// no second write to wait. A waiter's attempt made just after its watch
// listed the line and found it waiting, while the lease in its way has
// not ended and its place needs no renewal, is refused from that listing
// without a round trip. A watch opened or moved after an attempt listed
// the line sets itself from that listing: a node ahead of the waiter's
// that is still there when the watch is set is still the one ahead, since
// nodes ahead only leave. A waiter whose own listing finds it first takes
// the lock from its place too, as a handed-over one does, instead of
// writing. A waiter's attempt does not read again the lease of a holder
// this client read within the last second, unless that reading says the
// lease may have ended: a renewal only extends it (a shorter TTL's puts
// off the waiter's clearing of it by a look, never grants it early).
// A waiter that keeps a place does not read at all the lease of a holder
// it sights for the first time: its watch wakes it when the holder
// leaves, and its next attempt, which renews its place within a third of
// it (a safety poll, by default), reads the lease if the holder is still
// there; only a lease that lapses unreleased is cleared that much later.
// A plain Lock's watch, opened after its first refusal, is set once the
// attempt made at once after it has made the waiter's place, on the node
// ahead of that place, not first on the holder (within a second, it is
// set anyway). So a fair waiter's cycle is two writes and three reads at
// most, as go-zookeeper's zk.Lock's; a plain waiter's first attempt,
// which cannot keep a place, adds a sync, a listing and a read of the
// holder's lease.
//
// A create whose reply is lost leaves its node in the line: the owner is
// then marked uncertain, and its next call (the retry of Acquire, or
// Release) finds the node by its name instead of making another, so
// acquisition stays idempotent per owner and no orphan blocks the lock
// until the session ends (Curator's "protected" mode).
//
// # Fencing tokens
//
// A holding's token is its node's creation zxid, read from the same
// transaction that creates the node. Zxids are assigned by the ensemble's
// log: they increase across every key, and survive server restarts and
// leader changes, so a new holder's token is above every earlier one's.
// When a key is free, Inspect reports the last released holding's token,
// kept in the key's node until the node is reclaimed (see below), and 0
// after that. A zxid carries the leader's epoch in its high 32 bits, so
// tokens are large numbers (below 2^63) that jump at each leader change.
//
// # Re-entrant locks
//
// A re-entrant lease (a mutex locked with a distlock.OwnerID) is one node
// shared by its identity's holds, named e-hash-sequence after a hash of
// the identity; its data lists the holds by their owners' hashes, each
// with its lease length. The first hold creates the node; the others,
// from this client or another (a hand-over), join it with a write
// conditional on its version, get its token, and hold the lock while the
// node heads the line. Each release takes its hold out, and the last one
// deletes the node. The node is persistent, not ephemeral: it must not
// end with the session of whichever client made it while another holds
// it. So a re-entrant lease is bound to its TTL, not to a session: it
// ends at its last release, or when its lease (the longest of its
// holds', from its last renewal, on the leader's clock) lapses and the
// next contender deletes it; its holders trust it for TTL less drift, and
// Grant.Lost is nil. A re-entrant acquisition lists the line before it
// writes: 3 round trips when the lock is free.
//
// A re-entrant mutex may be fair (distlock.WithFairness): its first hold
// takes its turn, the identity's node keeping its place in line as a fair
// waiter's does, and each further hold of the identity, while it holds,
// is granted at once, ahead of the waiters behind it.
//
// # Reclaimed state
//
// A key's node and its line are container nodes (ZooKeeper 3.5 and newer):
// the leader deletes a container left without children at its next check
// of containers, every znode.container.checkIntervalMs (a Java system
// property of the servers, 60s by default). So once nobody holds or waits
// for a key (released, given up, or gone with its session), its line is
// deleted at the next check and its node, with the last token, at the one
// after: a key leaves nothing behind after two check intervals (two
// minutes by default; longer when more than znode.container.maxPerMinute
// containers await deletion), and its last token stays readable for one
// interval at least. Only the root and its clock node stay. Tokens are
// unaffected: zxids are global, so a key made again issues tokens above
// every earlier one. An acquisition that finds its line deleted under it
// makes it again.
//
// The node of a holder that stopped renewing, whose session lives on, is
// deleted by the next client it is in the way of, or by its own client
// shortly after its lease ends (by that client's clock, drift allowed
// for). Two things outlive all this: a re-entrant lease whose holders'
// processes all ended without releasing it (a persistent node: it goes
// when the next contender clears its lapsed lease), and a key's node or
// line made by an attempt that failed before making its own node and was
// never repeated (a container that never had a child is deleted only if
// the servers set znode.container.maxNeverUsedIntervalMs).
//
// # Leases on sessions
//
// A node lives as long as its session; a lease also has a TTL. Each
// node's data holds its lease length, counted from the node's last
// modification (its mtime, stamped by the leader): a node whose lease
// ran out on the leader's clock is deleted by the next client it is in
// the way of (with a delete conditional on its version, so a renewal in
// time wins). Refresh rewrites the node, restarting its lease. So a lock
// ends when its holder releases it, when its lease runs out unrenewed, or
// when its session expires, whichever comes first.
//
// The holder trusts its lease (Grant.ValidFor, the handle's ValidUntil)
// for min(TTL, session timeout) less the drift allowance, counted from the
// start of the last acquire or renewal that reached the ensemble: the
// session cannot have expired before then, since the ensemble heard from
// the client after that start. The session timeout is the one the
// ensemble granted, which is at most its maxSessionTimeout (40s unless
// configured otherwise), whatever the client asked for: a backend opened
// from a zk:// URL learns it from the client; [New] cannot, and trusts
// no more than [DefaultMaxSessionTimeout], or what [WithMaxSessionTimeout]
// states. The watchdog renews well within that
// bound, so Done closes no later than the moment the session may have
// expired. A connection lost and regained within the session timeout
// ("suspended", in Curator's words) keeps the lock: the renewals that
// failed meanwhile are retried, and the node, the session's, is still
// there. While suspended the lock is not known to be held, and like
// Curator we treat that as unsafe: the handle does not extend its
// deadline on anything but a confirmed renewal, so if the connection
// does not come back in time, Done closes at the deadline, before the
// ensemble may expire the session. When the client learns that its
// session expired, Grant.Lost closes and the lock ends at once.
//
// # Guarantees
//
//	Property                       Holds when
//	-----------------------------  -----------------------------------------------------------
//	Mutual exclusion               the ensemble keeps a quorum; a holder acts only before Done
//	                               (its ValidUntil); clocks run at rates within the drift
//	                               allowance (1% + 2ms by default); the leader's clock, across
//	                               leader changes, agrees with the holder's within the drift
//	                               allowance (keep the servers' clocks synchronised), since a
//	                               node whose lease lapsed on it is deleted by the next client in
//	                               its way; and the ensemble's maxSessionTimeout is no lower
//	                               than the session timeout trusted (learned from a zk:// URL;
//	                               with New, 40s or WithMaxSessionTimeout)
//	Takeover after a lapsed lease  the same: the leader's clock judges the lease
//	Lock survives a leader change  a new leader is elected, and the holder's renewal goes
//	                               through, before the handle's deadline (well within the
//	                               session timeout by default)
//	Lock survives a disconnect     the client reconnects, and renews, before that deadline
//	Fencing tokens increase        always: creation zxids, durable through restarts and
//	                               leader changes
//	FIFO order, no herd            mutexes, for the waiters in line: each keeps its node and
//	                               watches its predecessor only; a fair waiter is in line from
//	                               its first attempt, a plain one from its second (see above).
//	                               Writers keep their order among writers, but a release wakes
//	                               them all. Readers and permits: no order, and a release wakes
//	                               every such waiter (their retries only read the line)
//	No orphan after a lost reply   the caller retries or releases with the same owner
//	Re-entrant locks               mutexes only: one persistent node per identity, whose lease
//	                               ends at its TTL, not with a session (so mutual exclusion
//	                               rests on the leader's clock as for a lapsed lease)
//
// # The race detector
//
// go-zookeeper v1.0.4 has a data race of its own: when a connection is
// re-established while watches are set, it reads the last zxid it saw to
// re-register them as its new receive loop, already running, may write it
// (samuel/go-zookeeper#260). A program built with -race that reconnects
// under load can report it. It is in the client's bookkeeping, not in this
// package, which is why this repository tests zklock without -race.
//
// # Client settings
//
// [New] takes a connected *zk.Conn and the session timeout given to
// zk.Connect; the connection is the caller's, and Close leaves it open. The
// session timeout given to New must not exceed the one the ensemble
// grants: state the ensemble's maxSessionTimeout with
// [WithMaxSessionTimeout] if it is below 40s (or above, to trust more).
// The other options are [WithRoot] (where the keys' nodes live) and
// [WithDrift] (the clock drift allowance). New returns no error for a nil
// connection, a session timeout that is not positive or an invalid option
// (a root ZooKeeper cannot hold, a maximum session that is not positive,
// a nil drift function, a nil Option): every method of the backend then
// fails with an error wrapping driver.ErrInvalidBackend that names it,
// which package distlock reports at once. A "zk://" URL
// (see [OpenURL]) sets the servers, the root, the session and connect
// timeouts; the backend it opens owns its connection, learns the granted
// session timeout from it, and closes it with the backend.
package zklock
