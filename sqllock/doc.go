// Package sqllock is a distlock backend that keeps leases in one table of
// an SQL database: PostgreSQL, MySQL or MariaDB, or SQLite, through the
// caller's own *sql.DB (its driver, its pool).
//
// # How it works
//
// Each lock name is one row: owner, the last token, expiry, the family
// of lock that took the key, and the holder's metadata (see [Schema]).
// Expiry is set and judged by the database's clock in the statement
// itself; the client sends lease lengths, never times, so client clock
// skew does not matter.
//
// Acquire, Release and Refresh are single statements evaluated under the
// row's lock, so concurrent attempts have exactly one winner. PostgreSQL
// answers every call in one round trip; MySQL needs a second, read-only
// one when a release is repeated, and SQLite also when an attempt is
// refused (for the retry hint). The MySQL statement returns the granted
// token, or a refusal's retry hint and the row's family, as
// LAST_INSERT_ID(expr); it is tested on MariaDB 10.11. An attempt
// that the database rolls back for a conflict with a concurrent one (a
// deadlock, a serialisation failure, a busy SQLite file) is made once
// more before its error reaches the caller.
//
// A key's row, and the rows of its read-write or semaphore holds, are
// deleted once nobody has held the key for 10 seconds (a released hold's
// row 10 seconds after its release): a sweeper runs, while the backend is
// in use and the tables have rows, every 5 seconds.
//
// Two limits follow from deleting rows: Inspect of a key nobody held for a
// while reports token 0, and a release repeated more than 10 seconds after
// the first reports driver.ErrNotHeld. All clients of a table must run a
// version that deletes rows (see [Migration]).
//
// A key is used as one family of lock at a time: a mutex (re-entrant or
// not), a read-write lock, or a semaphore of one size. Its row records
// the family of the latest acquisition, and a request of another family,
// or a permit of another size, is refused with a *driver.KindError while
// any hold of the key is live (distlock fails TryLock and Lock at once on
// it). Every acquisition locks the key's row first, so two requests of
// different families cannot both be granted. A mutex's statement refuses
// a row of another family; a second transaction then finds that family's
// holds ended, makes the row a mutex's again and tries once more: the
// first mutex after a read-write lock or semaphore on a key pays three
// more round trips, later ones none.
//
// Release is idempotent per call: the row keeps the owner that released
// last, so a release repeated after a lost reply reports success, until
// the next holder of the key releases in turn or the row is reclaimed
// (then the repeat reports driver.ErrNotHeld, which distlock shows as
// ErrLockLost). A release that fails (a busy SQLite file, a lost
// connection) changed nothing or completed whole, and returns when its
// context ends; distlock repeats it until its outcome is known.
//
// Waiters are woken, not left to poll (Capabilities.Notify, every
// dialect). Every release wakes at once the waiters of the key in the
// same process, on any backend of the same table of the same database
// (the same SQLite file, the same server and database). On PostgreSQL
// every release of a key's last hold also sends pg_notify in its
// statement while a waiter's mark on the key's row lasts (a watch marks
// it when it begins, and its listener renews the mark while it waits:
// a release that nobody waits for notifies nobody), and a backend whose
// *sql.DB uses pgx (v5, stdlib) listens by itself: on one connection of
// its pool, opened by its first Watch (a pool limited to one connection
// is left to the other ways). Another
// driver needs [WithListener]; WithListener(nil) turns listening off. A
// mutex's release wakes one waiter: the mark also lists the backend's
// listener among the key's wakers, and the release names the first of
// them in its notice and takes it out; that backend wakes its waiter that
// began first, and the others sleep on, up to their safety poll and never
// past the holder's remaining lease. For 20ms after such a release, the
// key is kept for the named backend's waiters: another backend's attempt,
// the releasing one's above all, is refused until then (so a plain mutex
// changes hands rather than going back to the worker that released it),
// and a listener that vanished holds the key up no longer, and costs its
// waiters one safety poll (see marks.go in the source). A waiter that
// lost the lock to another after its turn lists itself again with its
// refused attempt. A
// lost listening connection is replaced and every watcher woken, since
// notices may have been missed. MySQL and MariaDB have no notifications:
// there a mutex's waiters block in the server, in GET_LOCK on the key's
// wake lock, which the holder of a contended key (one that waited for
// it) keeps on a connection of its pool while it holds the key and lets
// go of right after its release. The server grants a named lock to one
// session at a time, so a release wakes one waiting backend, in any
// process, which wakes its waiter that began first; the key is kept
// for that waiter for 20ms, and its attempt keeps the wake lock for its
// own holding. A release whose process has a waiter of the key hands
// the wake lock to it there, without letting go of it in the server, so
// that the waiters of other processes sleep on; while a holding keeps
// the wake lock, the waiters of its process wait in the process, not in
// the server. A holder that dies frees the wake lock with its
// connection, and a waiter blocks at most the holder's remaining lease,
// and at most a second, before it reads the key's row again. A holder
// that took the key without waiting keeps no wake lock (an uncontended
// acquire costs nothing more), and its waiters poll. Each waiting
// backend and each such holding has one connection of the pool lent to
// it; a pool limited by SetMaxOpenConns lends at most half of its
// connections less one, and a backend whose pool cannot spare one polls
// (see gate.go in the source). A waiter that nothing else reaches
// (SQLite across processes, MySQL as above, fair waiters on MySQL,
// PostgreSQL without a listener) is woken by its watch's poll of the
// key's row: one light SELECT, from 16ms apart up to 250ms, never past
// the holder's remaining lease, which wakes the waiter only when an
// attempt could succeed.
//
// Read-write locks and semaphores (Capabilities.ReadWrite and Semaphore,
// every dialect) keep one row per holder in a second table (see [Schema]),
// each expiring on its own. An attempt is one transaction on the key's
// lease row, which serialises the key's attempts: six round trips where a
// mutex takes one; Release and Refresh are single statements. A waiting
// writer leaves a claim that keeps new readers out until its wait ends.
// On MySQL that transaction runs at READ COMMITTED, which takes no gap
// locks, so that attempts on different keys do not deadlock; with the
// binary log on, that needs binlog_format ROW or MIXED (the defaults of
// MySQL 8 and MariaDB), not STATEMENT; so does the mutex's statement,
// which asks who has the key's wake lock.
//
// Fair (first-come, first-served) mutexes (Capabilities.Fair, every
// dialect, re-entrant ones too) keep their waiters in line in a third
// table (see [Schema]), each in its place for Request.Queue after its last
// attempt, so that a waiter that vanished is skipped within that time. A
// fair attempt is one transaction on the key's row (four to six round
// trips): it takes a free lease only if no live waiter queued before it.
// The row counts the waiters in line, so that a release with none stays
// one statement; a release that finds some frees the lease and grants it,
// in the same transaction (on PostgreSQL, usually one statement), to the
// oldest live waiter (a direct grant, as
// long as its place lasts), and wakes that waiter only (on PostgreSQL, the
// notice names it); the waiter's next attempt finds the lease its own and
// extends it to its TTL.
//
// A second mode, [WithConnectionScope], holds the database's native lock
// (PostgreSQL advisory locks, MySQL GET_LOCK) on a connection dedicated to
// the holding: the lock ends when that connection does, the handle ends
// (Grant.Lost) within [WithLossCheck] of the connection's loss, and the
// server disconnects a holder that stops renewing for a TTL. Tokens still
// come from the table. It needs PostgreSQL 14 or newer. See
// WithConnectionScope for when to use which.
//
// Keys are 1 to 1024 bytes of UTF-8 without NUL (driver.ErrInvalidKey
// otherwise), owner tokens 1 to 255 bytes of UTF-8 without NUL or comma,
// and every request is checked as driver.Request.Validate says
// (driver.ErrInvalidRequest otherwise). The lengths are the contract's,
// driver.MaxKeyLen and MaxOwnerLen, on every dialect.
//
// # Fencing tokens
//
// A key's tokens never go back, even when it is locked again after its row
// was deleted: on PostgreSQL they all come from one sequence per table
// (nextval, in the statement that grants); on MySQL and SQLite each row
// counts on from a floor, one row per table that the sweeper raises above
// a row's token, in the transaction that deletes it, before deleting it.
// Both are ordinary committed data, so tokens keep increasing across
// database crashes and restarts as long as the committed data survive (a
// restored older backup could repeat tokens); a PostgreSQL sequence
// moreover skips ahead, never back, after a crash.
//
// Every grant carries a token from the table's counter
// (driver.Grant.Token) for package fence to check at the protected
// resource; the Guarantees below say what must be true for tokens to keep
// increasing.
//
// # Re-entrant locks
//
// Locks are re-entrant (Capabilities.Reentrant, every dialect): the row
// lists the owners of its holds (see [Schema]), so a nested Acquire by the
// same re-entrant identity adds its owner with the lease's token, a
// repeated Acquire by a listed owner adds nothing, Release removes one
// owner and the last one frees the row. A lease with several holds is
// only ever lengthened. The table keeps a SHA-256 digest of the identity,
// never the identity. Owner tokens may not contain a comma, the list's
// separator; on MySQL the list is a BLOB (64 KiB: some thousands of holds
// of distlock's 32-byte owners). A repeated release is recognised only
// until another hold of the key is released (last_owner keeps one owner).
//
// # Guarantees
//
// Each row says what holds and what must be true for it.
//
//	guarantee                   what must be true
//	--------------------------  ---------------------------------------------------------
//	one holder at a time        the database commits each statement atomically under the
//	                            row's lock (every dialect does); expiry is judged by the
//	                            database's clock alone, in the statement: a client's
//	                            clock may be off by any amount, but a forward jump of
//	                            the database's clock ends leases early
//	fencing tokens increase,    tokens come from the table's counter (a sequence, or
//	  durably: across crashes   per-name counters above a floor), not from a clock or
//	  and restarts of the       from memory, so they keep increasing across crashes and
//	  database                  restarts (kill -9 included) as far as the table's
//	                            committed data survive: PostgreSQL and MySQL
//	                            with durable commits (their defaults: synchronous_commit
//	                            on, innodb_flush_log_at_trx_commit 1); SQLite as durable
//	                            as the file, with synchronous FULL (sqlurl's setting;
//	                            NORMAL in WAL mode can lose the last commits on power
//	                            loss); not across a restore of an older backup. On
//	                            PostgreSQL, a key's first statement after its row was
//	                            reclaimed must not stall inside the server for 10s
//	                            between drawing its token and writing its row
//	lost lease known by         the client's clock and the database's advance at rates
//	  ValidUntil (Done)         within the drift allowance (WithDrift)
//	connection-scoped lock      the server ends the holder's connection, or sees it end;
//	  ends with its connection  the handle ends (Grant.Lost) within WithLossCheck, also
//	                            when a restarted server gives its id to another client
//	one family per key          every acquisition locks the key's row first
//	prompt wake-up of waiters   a release in the same process, on PostgreSQL with a
//	                            listener (pgx: by default), on MySQL by a holder that
//	                            waited for the key; otherwise the watch's poll,
//	                            bounded by the holder's remaining lease by the database's
//	                            clock
//	fair order                  waiters live (attempting within Request.Queue); a
//	                            non-fair request on the same key does not queue
//	coordination across hosts   PostgreSQL, MySQL: yes; SQLite: one host's processes only
//
// # Client settings
//
// sqllock uses the caller's *sql.DB (its driver, its pool) and never
// closes it unless [WithOwnedDB] says so (the URL openers of package
// sqlurl do). [WithTable] names the table; [WithoutSchema] leaves its
// creation to a migration tool ([Schema], [Migration]); [WithDrift] sets
// the drift allowance; [WithListener] sets how a PostgreSQL backend hears
// releases; [WithConnectionScope] and [WithLossCheck] choose the
// connection-scoped mode. An option that cannot work makes New fail with
// an error wrapping driver.ErrInvalidBackend, which names it.
//
// The package imports database/sql only. Package sqlurl registers the URL
// schemes postgres, postgresql, mysql and sqlite and brings the drivers.
// SQLite coordinates the processes of one host sharing a file; it does
// not coordinate machines.
package sqllock
