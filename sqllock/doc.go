// Package sqllock is a distlock backend that keeps leases in one table of
// an SQL database: PostgreSQL, MySQL or MariaDB, or SQLite, through the
// caller's own *sql.DB (its driver, its pool).
//
// Each lock name is one row: owner, a fencing-token counter, expiry, and
// the holder's metadata (see [Schema]). Expiry is set and judged by the
// database's clock in the statement itself; the client sends lease
// lengths, never times, so client clock skew does not matter. Rows are
// never deleted, only marked free, so tokens come from the database and
// keep increasing across database crashes and restarts, as long as the
// table's committed rows survive (a restored older backup could repeat
// tokens).
//
// Acquire, Release and Refresh are single statements evaluated under the
// row's lock, so concurrent attempts have exactly one winner. PostgreSQL
// answers every call in one round trip; MySQL and SQLite need a second,
// read-only one when an attempt is refused (for the retry hint) or a
// release is repeated. The MySQL statement reads the granted token back
// through LAST_INSERT_ID(expr); it is tested on MariaDB 10.11. An attempt
// that the database rolls back for a conflict with a concurrent one (a
// deadlock, a serialisation failure, a busy SQLite file) is made once
// more before its error reaches the caller.
//
// Release is idempotent per call: the row keeps the owner that released
// last, so a release repeated after a lost reply reports success, until
// the next holder of the key releases in turn (then the repeat reports
// driver.ErrNotHeld, which distlock shows as ErrLockLost).
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
// On PostgreSQL, with [WithListener] (package sqllock/pglisten, for pgx),
// waiters are notified (Capabilities.Notify): every release of a key's
// last hold sends pg_notify in its statement, whether or not the releasing
// backend listens, and each backend listens on one connection of its pool,
// opened by its first Watch; a lost connection is replaced and every
// watcher woken, since notices may have been missed. Without a listener,
// and on MySQL and SQLite, waiters poll with jitter, bounded by the
// holder's remaining lease.
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
// MySQL 8 and MariaDB), not STATEMENT.
// Fair (FIFO) locks are not offered yet (Capabilities.Fair is false):
// fair requests fail with an error wrapping errors.ErrUnsupported. Keys
// are 1 to 1024 bytes of UTF-8 without NUL (driver.ErrInvalidKey
// otherwise).
//
// A second mode, [WithConnectionScope], holds the database's native lock
// (PostgreSQL advisory locks, MySQL GET_LOCK) on a connection dedicated to
// the holding: the lock ends when that connection does, the handle ends
// (Grant.Lost) within [WithLossCheck] of the connection's loss, and the
// server disconnects a holder that stops renewing for a TTL. Tokens still
// come from the table. See WithConnectionScope for when to use which.
//
// The package imports database/sql only. Package sqlurl registers the URL
// schemes postgres, postgresql, mysql and sqlite and brings the drivers.
// SQLite coordinates the processes of one host sharing a file; it does
// not coordinate machines.
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
//	fencing tokens increase,    tokens come from the table's per-name counter, not from
//	  durably: across crashes   a clock or from memory, so they keep increasing across
//	  and restarts of the       crashes and restarts (kill -9 included) as far as the
//	  database                  table's committed rows survive: PostgreSQL and MySQL
//	                            with durable commits (their defaults: synchronous_commit
//	                            on, innodb_flush_log_at_trx_commit 1); SQLite as durable
//	                            as the file, with synchronous FULL (sqlurl's setting;
//	                            NORMAL in WAL mode can lose the last commits on power
//	                            loss); not across a restore of an older backup
//	lost lease known by         the client's clock and the database's advance at rates
//	  ValidUntil (Done)         within the drift allowance (WithDrift)
//	connection-scoped lock      the server ends the holder's connection, or sees it end;
//	  ends with its connection  the handle ends (Grant.Lost) within WithLossCheck
//	prompt wake-up of waiters   PostgreSQL with WithListener; otherwise polling, bounded
//	                            by the holder's remaining lease by the database's clock
//	coordination across hosts   PostgreSQL, MySQL: yes; SQLite: one host's processes only
package sqllock
