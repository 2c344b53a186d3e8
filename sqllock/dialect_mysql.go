package sqllock

import (
	"database/sql"
	"regexp"
	"strconv"
	"strings"

	"github.com/distlock-go/distlock/driver"
)

// mysqlDialect is MySQL 8 or MariaDB 10.5 or newer. Keys and owners are
// VARBINARY, compared byte for byte whatever the server's collation.
// Their columns hold the contract's limits, driver.MaxKeyLen and
// MaxOwnerLen, so every dialect stores what the contract allows.
// Tokens count from the floor row (name ”); MySQL has no RETURNING, so
// a statement returns the token it set as LAST_INSERT_ID(expr) in the OK
// packet, and a row is read with a second statement. It has no
// notifications: a mutex's waiters block on the key's wake lock, a named
// lock (gate.go), and poll otherwise.
// Connection-scoped locks are named locks (conn_mysql.go).
var mysqlDialect = &dialect{
	name:     MySQL,
	now:      `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`,
	newToken: `(SELECT COALESCE(MAX(f.token), 0) + 1 FROM (SELECT token FROM {table} WHERE name = '' LOCK IN SHARE MODE) f)`,
	// The floor row is read under a shared lock, which the sweeper's
	// exclusive one waits for: a floor read before the sweeper raised it
	// cannot meet the deletion of a row it should have been above.
	next:         `LAST_INSERT_ID(token + 1)`,
	keep:         `token = LAST_INSERT_ID(token), `,
	rename:       mysqlUpsert,
	placeholders: positional,
	lease: func(table string) string {
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name       VARBINARY(` + strconv.Itoa(driver.MaxKeyLen) + `) NOT NULL PRIMARY KEY,
	owners     BLOB NOT NULL,
	token      BIGINT NOT NULL DEFAULT 0,
	holds      INT NOT NULL DEFAULT 0,
	expires_us BIGINT NOT NULL DEFAULT 0,
	since_us   BIGINT NOT NULL DEFAULT 0,
	meta       TEXT NOT NULL,
	last_owner VARBINARY(` + strconv.Itoa(driver.MaxOwnerLen) + `) NOT NULL DEFAULT '',
	reentry    VARBINARY(64) NOT NULL DEFAULT '',
	kind       INTEGER NOT NULL DEFAULT 0,
	lim        INTEGER NOT NULL DEFAULT 0,
	queued     INTEGER NOT NULL DEFAULT 0
) ENGINE=InnoDB`
	},
	counter: func(table string) []string {
		return []string{`INSERT IGNORE INTO ` + table + ` (name, owners, meta) VALUES ('', '', '')`}
	},
	types: columnTypes{
		key: "VARBINARY(" + strconv.Itoa(driver.MaxKeyLen) + ")", owner: "VARBINARY(" + strconv.Itoa(driver.MaxOwnerLen) + ")",
		kind: "SMALLINT", text: "TEXT NOT NULL", tail: " ENGINE=InnoDB",
	},
	lockRow: func(cols string) (string, string) {
		return `INSERT INTO {table} (name, owners, meta, token) VALUES ($1, '', '', {newtoken} - 1) ON DUPLICATE KEY UPDATE token = token`,
			`SELECT ` + cols + ` FROM {table} WHERE name = $1`
	},
	concat: func(parts ...string) string { return `CONCAT(` + strings.Join(parts, ", ") + `)` },
	// One round trip when granted: the token comes back as
	// LAST_INSERT_ID(expr) in the OK packet (0: refused). Assignments run
	// left to right and see the values assigned before them, so the
	// columns that ask how the row was come first; owners then says
	// whether the attempt was granted (it names the owner), and holds is
	// counted from it. The VALUES row is evaluated even when the key
	// exists, so a refusal resets LAST_INSERT_ID to 0. Without a WHERE, a
	// refusal assigns every column its old value, and replies with the
	// holder's remaining lease and the row's family (see refusal); kind,
	// never assigned, refuses a row of another family in every column. BUSY is a live
	// lease, or a key kept for the waiter that a release woke: released
	// less than {turn} µs ago (turnFor) while another connection than the
	// attempt's gate ($7, its CONNECTION_ID; 0 for none) has the key's
	// wake lock (see gate.go).
	mutexAcquire: func(string) string {
		return strings.NewReplacer("LIVE", `(owners <> '' AND expires_us > {now})`, "MINE", `INSTR(owners, $6) > 0`, "JOIN", `($5 <> '' AND reentry = $5)`).
			Replace(strings.NewReplacer("REFUSE", refusal, "BUSY", `(LIVE OR (owners = '' AND expires_us > {now} - {turn} AND COALESCE(IS_USED_LOCK(`+wakeLockSQL+`), $7) <> $7))`).Replace(`INSERT INTO {table} (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $6, LAST_INSERT_ID({newtoken}), 1, {now} + $3, {now}, $4, $5)
	ON DUPLICATE KEY UPDATE
		token = IF(kind <> 0, REFUSE, IF(BUSY, IF(MINE OR (LIVE AND JOIN), LAST_INSERT_ID(token), REFUSE), LAST_INSERT_ID(token + 1))),
		since_us = IF(kind <> 0 OR BUSY, since_us, {now}),
		meta = IF(kind <> 0 OR BUSY, meta, $4),
		reentry = IF(kind <> 0 OR BUSY, reentry, $5),
		owners = IF(kind <> 0, owners, IF(BUSY, IF(MINE OR NOT (LIVE AND JOIN), owners, CONCAT(owners, $2, ',')), $6)),
		holds = IF(kind <> 0 OR owners = '', holds, LENGTH(owners) - LENGTH(REPLACE(owners, ',', '')) - 1),
		expires_us = IF(kind = 0 AND INSTR(owners, $6) > 0, IF(holds > 1, GREATEST(expires_us, {now} + $3), {now} + $3), expires_us)`))
	},
	acquireReply:  replyInsertID,
	byInsertID:    true,
	countsChanged: true,
	prepares:      true,
	// READ COMMITTED: the key's row serialises its attempts at any
	// isolation level, and it spares the gap locks with which InnoDB's
	// REPEATABLE READ makes attempts on different keys deadlock.
	tx: &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	sweep: func(free string) sweepTexts {
		return sweepTexts{
			floor:     `INSERT IGNORE INTO {table} (name, owners, meta) VALUES ('', '', '')`,
			lockFloor: `SELECT token FROM {table} WHERE name = '' FOR UPDATE`,
			top:       `SELECT COALESCE(MAX(token), 0) FROM {table} WHERE ` + free,
			raise:     `UPDATE {table} SET token = GREATEST(token, $1) WHERE name = ''`,
			leases:    `DELETE FROM {table} WHERE ` + free + ` AND token <= $1`,
		}
	},
	identity: `SELECT CONCAT(@@hostname, '|', @@port, '|', COALESCE(DATABASE(), ''))`,
	native:   func(b *Backend) nativeLocks { return namedLocks{b} },
}

// refusal leaves a row's token as it is and sets LAST_INSERT_ID to
// refusedBase + 8 × left + kind, which the OK packet carries: left is 0
// when unknown (a free key, kept for a woken waiter), else 1 + the
// holder's remaining lease in µs; kind is the row's family (0 to 3). A
// token never comes near refusedBase, so one request tells a refusal, the
// retry hint and the family apart from a grant.
const refusal = `IF(LAST_INSERT_ID(4611686018427387904 + 8 * IF(owners = '', 0, GREATEST(expires_us - {now}, 0) + 1) + kind) = 0, token, token)`

// refusedBase is 1<<62, the least reply of a refused mutex statement.
const refusedBase = 1 << 62

var (
	onConflict = regexp.MustCompile(`ON CONFLICT \([a-z_, ]+\) DO UPDATE SET`)
	excluded   = regexp.MustCompile(`excluded\.([a-z_]+)`)
)

// mysqlUpsert writes ON CONFLICT (cols) DO UPDATE SET c = excluded.c as
// MySQL does: ON DUPLICATE KEY UPDATE c = VALUES(c).
func mysqlUpsert(query string) string {
	if !onConflict.MatchString(query) {
		return query
	}
	query = onConflict.ReplaceAllString(query, "ON DUPLICATE KEY UPDATE")
	return excluded.ReplaceAllString(query, "VALUES($1)")
}
