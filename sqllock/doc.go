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
// through LAST_INSERT_ID(expr); it is tested on MariaDB 10.11.
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
// holder's remaining lease. Fair,
// read-write and semaphore requests fail with an error wrapping
// errors.ErrUnsupported. Keys are 1 to 1024 bytes of UTF-8 without NUL
// (driver.ErrInvalidKey otherwise).
//
// The package imports database/sql only. Package sqlurl registers the URL
// schemes postgres, postgresql, mysql and sqlite and brings the drivers.
// SQLite coordinates the processes of one host sharing a file; it does
// not coordinate machines.
package sqllock
