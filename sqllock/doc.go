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
// sqllock offers exclusive locks only (Capabilities all false): waiters
// poll with jitter, bounded by the holder's remaining lease; fair,
// read-write, semaphore and re-entrant requests fail with an error
// wrapping errors.ErrUnsupported. Keys are 1 to 1024 bytes of UTF-8
// without NUL (driver.ErrInvalidKey otherwise).
//
// The package imports database/sql only. Package sqlurl registers the URL
// schemes postgres, postgresql, mysql and sqlite and brings the drivers.
// SQLite coordinates the processes of one host sharing a file; it does
// not coordinate machines.
package sqllock
