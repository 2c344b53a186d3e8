package sqllock

import "strings"

// postgresDialect is PostgreSQL 12 or newer. Tokens come from the table's
// sequence; statements return what they set (RETURNING) and read the row
// they refuse in the same round trip; a release notifies the key's
// waiters (LISTEN/NOTIFY) in the statement that commits it; pgx keeps the
// statements prepared on each connection itself. Connection-scoped locks
// are advisory locks (conn_postgres.go).
// namedPayload is the notice of a mutex's release ($1) that names the
// listener woken: ";", the listener, ";", the key; the key alone when it
// names none.
const namedPayload = `CASE WHEN woken = '' THEN $1 ELSE ';' || woken || ';' || $1 END`

// turnFor is how long (µs) a mutex released with a notice that named a
// listener is kept for that listener's waiters: long enough for the
// notice to reach it and its attempt to come back on a loaded machine,
// short enough that a listener that vanished holds the others up little.
const turnFor = `20000`

// kept: the row t is a mutex released less than turnFor ago whose notice
// named another listener than $7.
const kept = `(t.woken <> '' AND t.woken <> $7 AND t.owners = '' AND t.expires_us > {now} - ` + turnFor + `)`

var postgresDialect = &dialect{
	name: Postgres,
	// now() is the statement's start in autocommit: a statement that
	// waited on a row lock sets an earlier expiry, never a later one.
	now:       `(EXTRACT(EPOCH FROM now())*1000000)::BIGINT`,
	newToken:  `nextval('{seq}')`,
	next:      `GREATEST(nextval('{seq}'), token + 1)`,
	returning: ` RETURNING token`,
	rename:    strings.NewReplacer("INSTR(", "strpos(").Replace,
	lease: func(table string) string {
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name       TEXT PRIMARY KEY,
	owners     TEXT NOT NULL DEFAULT '',
	token      BIGINT NOT NULL DEFAULT 0,
	holds      INTEGER NOT NULL DEFAULT 0,
	expires_us BIGINT NOT NULL DEFAULT 0,
	since_us   BIGINT NOT NULL DEFAULT 0,
	meta       TEXT NOT NULL DEFAULT '',
	last_owner TEXT NOT NULL DEFAULT '',
	reentry    TEXT NOT NULL DEFAULT '',
	kind       INTEGER NOT NULL DEFAULT 0,
	lim        INTEGER NOT NULL DEFAULT 0,
	queued     INTEGER NOT NULL DEFAULT 0,
	waiting_us BIGINT NOT NULL DEFAULT 0,
	wakers     TEXT NOT NULL DEFAULT '',
	woken      TEXT NOT NULL DEFAULT ''
)`
	},
	counter: func(table string) []string {
		seq := sequence(table)
		return []string{
			`CREATE SEQUENCE IF NOT EXISTS ` + seq,
			// The last value drawn: last_value once is_called.
			`SELECT setval('` + seq + `', m) FROM (SELECT max(token) AS m FROM ` + table + `) x
	WHERE m > (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ` + seq + `)`,
		}
	},
	types: columnTypes{key: "TEXT", owner: "TEXT", kind: "SMALLINT", text: "TEXT NOT NULL DEFAULT ''"},
	lockRow: func(cols string) (string, string) {
		return `INSERT INTO {table} AS t (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET token = t.token RETURNING ` + cols, ""
	},
	concat: func(parts ...string) string { return strings.Join(parts, " || ") },
	// One round trip: the refused case reads the holder's remaining
	// lease and the row's family in the same statement. A key the
	// statement's snapshot shows held by another is refused without the
	// INSERT: a refused ON CONFLICT DO UPDATE would still lock the row,
	// which makes the attempt a write that a waiting release queues
	// behind. A release that commits after the snapshot is notified to
	// the waiter, whose watch began before the attempt.
	//
	// A key whose release named another listener than this backend's ($7)
	// is kept for that listener's waiter for turnFor after the release
	// (see marks.go): the releasing worker, which asks again at once,
	// does not take the key back before the waiter woken for it can ask.
	// Refused, the attempt learns when that ends.
	mutexAcquire: func(upsert string) string {
		upsert = strings.Replace(upsert, `
	VALUES ($1, $6, {newtoken}, 1, {now} + $3, {now}, $4, $5)`, `
	SELECT $1, $6, {newtoken}, 1, {now} + $3, {now}, $4, $5
	WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.name = $1 AND t.kind = 0 AND (LIVE AND NOT (MINE OR JOIN) OR `+kept+`))`, 1)
		upsert = strings.Replace(upsert, `
	RETURNING t.token`, ` AND NOT `+kept+`
	RETURNING t.token`, 1)
		return `WITH up AS (` + upsert + `)
SELECT token, 0::BIGINT, 0 FROM up
UNION ALL
SELECT 0::BIGINT, CASE WHEN ` + kept + ` THEN t.expires_us + ` + turnFor + ` - {now} ELSE t.expires_us - {now} END, kind
FROM {table} t WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM up)`
	},
	acquireReply: replyRow,
	// The notice goes out when the statement commits; a statement that
	// ended no holding sends none. RETURNING runs for each row changed
	// whether or not the client reads it: the statement stays a plain
	// UPDATE (or DELETE) whose result counts the rows, with no CTE to plan
	// and no row to scan.
	notice: func(update, ended string) string {
		return update + ` RETURNING CASE WHEN ` + ended + ` THEN pg_notify('{channel}', $1)::TEXT END`
	},
	// The notice of a hand-over names the waiter, so that only it wakes.
	turn: `SELECT pg_notify('{channel}', $2 || $1)`,
	// The usual fair release in one statement: the only hold of the owner
	// $2 ($3 between commas) becomes a lease of the oldest live waiter
	// for as long as its place lasts, which leaves the line (with the
	// places that ended), and the notice names it. The waiters are read
	// in the statement's snapshot: one that joined the line while the
	// release waited for the row is counted by its own attempt, and one
	// that left meanwhile holds the lease no longer than its place.
	// The DELETE's rows are still in the SELECT's snapshot, which skips
	// them by their end: now() is the transaction's time.
	head: `WITH ended AS (DELETE FROM {queue} WHERE name = $1 AND expires_us <= {now})
	SELECT owner, expires_us - {now} FROM {queue} WHERE name = $1 AND expires_us > {now} ORDER BY seq, owner LIMIT 1`,
	handOver: `WITH h AS (
	SELECT owner, expires_us - {now} AS place FROM {queue}
	WHERE name = $1 AND expires_us > {now} AND owner <> $2 ORDER BY seq, owner LIMIT 1
), g AS (
	UPDATE {table} t SET last_owner = $2, owners = ',' || h.owner || ',', holds = 1, expires_us = {now} + h.place,
		since_us = {now}, meta = '', reentry = '', kind = 0, lim = 0, token = GREATEST(nextval('{seq}'), t.token + 1),
		queued = (SELECT count(*) FROM {queue} q WHERE q.name = $1 AND q.expires_us > {now} AND q.owner <> $2) - 1
	FROM h WHERE t.name = $1 AND t.owners = $3 AND t.expires_us > {now} AND t.kind = 0 AND t.queued > 0
	RETURNING h.owner
), d AS (
	DELETE FROM {queue} q USING g WHERE q.name = $1 AND (q.owner = g.owner OR q.owner = $2 OR q.expires_us <= {now})
)
SELECT owner, pg_notify('{channel}', ',' || owner || ',' || $1)::TEXT FROM g`,
	sweep: func(free string) sweepTexts {
		return sweepTexts{leases: `DELETE FROM {table} WHERE ` + free}
	},
	columns: []string{`waiting_us BIGINT NOT NULL DEFAULT 0`, `wakers TEXT NOT NULL DEFAULT ''`, `woken TEXT NOT NULL DEFAULT ''`},
	// A waiter's mark creates the key's row if need be (a free one), and
	// puts its listener ($4, a comma after it; '' for none) last in the
	// key's wakers unless it is there already. The wakers keep the last
	// 64 listeners (of 16 characters and a comma each).
	mark: `INSERT INTO {table} AS t (name, waiting_us, wakers) VALUES ($1, {now} + $2, $4)
	ON CONFLICT (name) DO UPDATE SET waiting_us = GREATEST(t.waiting_us, excluded.waiting_us),
		wakers = CASE WHEN strpos(',' || t.wakers, ',' || $4) > 0 THEN t.wakers
			WHEN length(t.wakers) >= 64 * 17 THEN substr(t.wakers, strpos(t.wakers, ',') + 1) || $4
			ELSE t.wakers || $4 END
	WHERE t.waiting_us < {now} + $3 OR strpos(',' || t.wakers, ',' || $4) = 0`,
	// A mutex's release takes the first listener out of the key's wakers
	// (the SET clauses read the row as it was) and names it in the
	// notice: that listener wakes one waiter, the others sleep on. With
	// no listener in the wakers, the notice wakes every waiter.
	releaseOne: func(update, ended string) string {
		const ends = `owners = $3 AND waiting_us >= {now}`
		update = strings.Replace(update, `SET `, `SET woken = CASE WHEN `+ends+` THEN split_part(wakers, ',', 1) ELSE '' END,
		wakers = CASE WHEN `+ends+` THEN substr(wakers, strpos(wakers, ',') + 1) ELSE wakers END, `, 1)
		return update + ` RETURNING CASE WHEN ` + ended + ` THEN pg_notify('{channel}', ` + namedPayload + `)::TEXT END`
	},
	// A listener named by a release for a key it no longer waits on
	// passes the turn to the next, if the key is free.
	passOn: `UPDATE {table} SET woken = split_part(wakers, ',', 1), wakers = substr(wakers, strpos(wakers, ',') + 1)
	WHERE name = $1 AND (owners = '' OR expires_us <= {now}) RETURNING pg_notify('{channel}', ` + namedPayload + `)::TEXT`,
	watched:  `waiting_us >= {now}`,
	identity: `SELECT current_database() || '|' || COALESCE(host(inet_server_addr()), '') || '|' || COALESCE(inet_server_port(), 0)::TEXT`,
	listens:  true,
	native:   func(b *Backend) nativeLocks { return advisoryLocks{b} },
}
