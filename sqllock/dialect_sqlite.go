package sqllock

import "strings"

// sqliteDialect is SQLite 3.35 or newer (UPSERT and RETURNING). Tokens count
// from the floor row (name ”); statements return what they set
// (RETURNING), and a refused attempt reads the row with a second
// statement. One file on one machine: waiters in this process are woken
// directly, the others poll. SQLite has no connection-scoped locks.
var sqliteDialect = &dialect{
	name:         SQLite,
	now:          `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`,
	newToken:     `(SELECT COALESCE(MAX(token), 0) + 1 FROM {table} WHERE name = '')`,
	next:         `token + 1`,
	returning:    ` RETURNING token`,
	rename:       strings.NewReplacer("GREATEST(", "max(").Replace,
	placeholders: questioned,
	lease: func(table string) string {
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name       TEXT PRIMARY KEY,
	owners     TEXT NOT NULL DEFAULT '',
	token      INTEGER NOT NULL DEFAULT 0,
	holds      INTEGER NOT NULL DEFAULT 0,
	expires_us INTEGER NOT NULL DEFAULT 0,
	since_us   INTEGER NOT NULL DEFAULT 0,
	meta       TEXT NOT NULL DEFAULT '',
	last_owner TEXT NOT NULL DEFAULT '',
	reentry    TEXT NOT NULL DEFAULT '',
	kind       INTEGER NOT NULL DEFAULT 0,
	lim        INTEGER NOT NULL DEFAULT 0,
	queued     INTEGER NOT NULL DEFAULT 0
)`
	},
	counter: func(table string) []string {
		return []string{`INSERT OR IGNORE INTO ` + table + ` (name) VALUES ('')`}
	},
	types: columnTypes{key: "TEXT", owner: "TEXT", kind: "INTEGER", text: "TEXT NOT NULL DEFAULT ''"},
	lockRow: func(cols string) (string, string) {
		return `INSERT INTO {table} (name, token) VALUES ($1, {newtoken} - 1) ON CONFLICT (name) DO UPDATE SET token = token RETURNING ` + cols, ""
	},
	concat: func(parts ...string) string { return strings.Join(parts, " || ") },
	// SQLite names the old row by the table's name, without an alias.
	mutexAcquire: func(upsert string) string { return strings.NewReplacer(" AS t ", " ", "t.", "").Replace(upsert) },
	acquireReply: replyReturning,
	prepares:     true,
	sweep: func(free string) sweepTexts {
		return sweepTexts{
			floor:  `INSERT OR IGNORE INTO {table} (name) VALUES ('')`,
			raise:  `UPDATE {table} SET token = max(token, (SELECT COALESCE(max(token), 0) FROM {table} WHERE ` + free + `)) WHERE name = ''`,
			leases: `DELETE FROM {table} WHERE ` + free + ` AND token <= (SELECT token FROM {table} WHERE name = '')`,
		}
	},
	identity: `SELECT file FROM pragma_database_list WHERE name = 'main'`,
}
