package sqllock

import (
	"database/sql"
	"fmt"
	"regexp"
	"strings"
)

// Dialect is the SQL flavour of a database.
type Dialect string

// The dialects sqllock speaks.
const (
	Postgres Dialect = "postgres" // PostgreSQL 12 or newer
	MySQL    Dialect = "mysql"    // MySQL 8 or MariaDB 10.5 or newer
	SQLite   Dialect = "sqlite"   // SQLite 3.35 or newer (UPSERT and RETURNING)
)

// DefaultTable is the lease table's name unless [WithTable] says otherwise.
const DefaultTable = "distlock_leases"

// Schema returns the DDL that creates the lease table for dialect, for
// migration tools; New runs it (CREATE TABLE IF NOT EXISTS) on first use
// unless [WithoutSchema] is given. One row per lock name:
//
//	name        the key ('' is the token floor row on MySQL and SQLite)
//	owners      the owner tokens of a mutex's holds, each followed by a
//	            comma after a leading one (",a,b,"); '' when free
//	token       the last token issued for the name
//	holds       the number of owners: re-entrant holds; 0 when free
//	reentry     SHA-256 (hex) of the lease's re-entrant identity, or ''
//	expires_us  the mutex lease's end, or when it was released,
//	            microseconds since the Unix epoch by the database's clock
//	            (never a client's); for a read-write lock or a semaphore,
//	            when the newest hold was granted
//	since_us    when the current holding began, same clock
//	meta        the holder's metadata, a JSON object
//	last_owner  the owner that released last, so that a repeated release
//	            reports success
//	kind        the family the key was last taken as: 0 mutex, 1
//	            read-write lock, 3 semaphore (driver.Kind's Family)
//	lim         with kind 3: the semaphore's size
//	queued      the number of fair waiters in line (see below)
//	waiting_us  PostgreSQL only: until when a waiter listens for the
//	            key's release, same clock; a release notifies the key's
//	            waiters (pg_notify) only while it lasts
//	wakers      PostgreSQL only: the listeners (one per backend, the
//	            last 64) with a waiter for the key, each followed by a
//	            comma, in the order they began to wait; a mutex's release
//	            names the first in its notice and takes it out
//	woken       PostgreSQL only: the listener the last release named
//
// A second table, the same name followed by "_holds", keeps one row per
// holder of the read-write locks and semaphores (see holdsSchema in the
// source: name, owner, kind, token, expires_us, released_us, meta; primary
// key (name, owner)). A third, the name followed by "_queue", keeps the
// fair waiters in line (see queueSchema in the source: name, owner, seq,
// expires_us; primary key (name, owner)). Tokens come from one counter per table: on
// PostgreSQL a sequence, the table's name followed by "_seq"; on MySQL and
// SQLite the token of the row with the empty name, the floor above which
// a new row's counter starts (see the package doc). The DDL is statements
// separated by ";\n".
//
// A table made by an older version lacks the columns kind, lim, queued,
// waiting_us, wakers or woken, the queue table, or the counter: New's backend adds them on first use; with [WithoutSchema],
// run [Migration] first, with every client of the table stopped.
//
// It returns an error for an unknown dialect or a table name that is not
// one or two (schema-qualified) SQL identifiers of at most 57 characters.
func Schema(d Dialect, table string) (string, error) {
	if err := checkTable(table); err != nil {
		return "", err
	}
	x, err := lookup(d)
	if err != nil {
		return "", err
	}
	return strings.Join(x.schema(table), ";\n"), nil
}

// Migration returns the statements, separated by ";\n", that bring a
// lease table made by an older version (without the columns kind, lim,
// queued, waiting_us, wakers or woken, the queue table or the token counter) to the
// current [Schema]. Each adds one thing: run them once, skipping the ALTER
// TABLE of a column the table has already (a table of the version before
// fair locks lacks queued only; one of the version before waiting_us,
// that and the two after it; one of the version before wakers, wakers
// and woken), with every client of the table stopped: older clients
// neither delete rows nor know the counter, the line or the waiters'
// marks, so the two must not share a table.
func Migration(d Dialect, table string) (string, error) {
	if _, err := Schema(d, table); err != nil {
		return "", err
	}
	x := dialects[d]
	return strings.Join(append(append(addColumns(x, table), queueSchema(x, table)), x.counter(table)...), ";\n"), nil
}

// addColumns adds the columns that versions before kinds were enforced
// (kind, lim), before fair locks (queued) and before waiters' marks (the
// dialect's own) lacked.
func addColumns(d *dialect, table string) []string {
	cols := append([]string{
		`kind INTEGER NOT NULL DEFAULT 0`,
		`lim INTEGER NOT NULL DEFAULT 0`,
		`queued INTEGER NOT NULL DEFAULT 0`,
	}, d.columns...)
	for i, c := range cols {
		cols[i] = `ALTER TABLE ` + table + ` ADD COLUMN ` + c
	}
	return cols
}

// probeColumns selects the columns addColumns adds, from no row: it
// fails on a table that lacks one.
func probeColumns(d *dialect, table string) string {
	names := []string{"kind", "lim", "queued"}
	for _, c := range d.columns {
		names = append(names, strings.Fields(c)[0])
	}
	return `SELECT ` + strings.Join(names, ", ") + ` FROM ` + table + ` WHERE 1 = 0`
}

// sequence names the PostgreSQL sequence of a lease table's tokens.
func sequence(table string) string { return table + "_seq" }

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,56}(\.[A-Za-z_][A-Za-z0-9_]{0,56})?$`)

// checkTable accepts identifier characters only: the name is spliced into
// SQL, which has no placeholders for table names.
func checkTable(table string) error {
	if !identifier.MatchString(table) {
		return fmt.Errorf("sqllock: table name %q: want letters, digits and underscores (schema.table allowed)", table)
	}
	return nil
}

// DetectDialect names the dialect of db's driver: pgx (stdlib) and lib/pq
// are Postgres, go-sql-driver/mysql is MySQL, modernc.org/sqlite and
// mattn/go-sqlite3 are SQLite. Other drivers need [WithDialect].
func DetectDialect(db *sql.DB) (Dialect, error) {
	if db == nil {
		return "", fmt.Errorf("sqllock: nil *sql.DB")
	}
	name := fmt.Sprintf("%T", db.Driver())
	switch {
	case strings.HasPrefix(name, "*stdlib."), strings.HasPrefix(name, "*pq."), strings.HasPrefix(name, "pq."):
		return Postgres, nil
	case strings.HasPrefix(name, "*mysql."), strings.HasPrefix(name, "mysql."):
		return MySQL, nil
	case strings.HasPrefix(name, "*sqlite."), strings.HasPrefix(name, "*sqlite3."):
		return SQLite, nil
	}
	return "", fmt.Errorf("sqllock: cannot tell the SQL dialect of driver %s; use WithDialect", name)
}

// dialect is what a Dialect changes, chosen once by New: the functions
// and clauses its statements are written with, its schema, and the few
// behaviours in which the dialects differ. Each is described in its own
// file (dialect_postgres.go, dialect_mysql.go, dialect_sqlite.go); the
// engines read these fields and never ask which dialect they speak.
type dialect struct {
	name Dialect

	// Markers of the statements' text (see stmt).
	now      string // {now}: the database clock in µs since the Unix epoch
	newToken string // {newtoken}: the first token of a key that has no row
	next     string // {next}: the next token of the row being updated (token)
	// {returning}: the clause that returns the token an UPDATE set; ""
	// where it comes back as LAST_INSERT_ID(expr) instead (see byInsertID).
	returning string
	keep      string // {keep}: an assignment that returns the token kept, or ""

	// rename rewrites what the statements are written with into the
	// dialect's spelling: INSTR and GREATEST (PostgreSQL's strpos,
	// SQLite's max), ON CONFLICT (cols) DO UPDATE SET c = excluded.c
	// (MySQL's ON DUPLICATE KEY UPDATE c = VALUES(c)).
	rename func(query string) string
	// placeholders: how $n is written (see stmt): numbered as $n
	// (PostgreSQL), as ?n (SQLite), or positional ? with the arguments in
	// order (MySQL).
	placeholders placeholderStyle

	lease   func(table string) string   // the lease table's DDL
	counter func(table string) []string // the token counter (see Schema)
	types   columnTypes                 // of the holds and queue tables

	// lockRow returns a statement that creates the key's ($1) row if need
	// be, locks it to the end of the transaction and selects cols, and
	// read, a second statement that selects them when lock cannot ("").
	lockRow func(cols string) (lock, read string)
	// concat joins SQL string expressions.
	concat func(parts ...string) string
	// mutexAcquire turns the mutex's upsert (see prepareStatements) into
	// the dialect's acquire statement; how its reply is read is
	// acquireReply.
	mutexAcquire func(upsert string) string
	acquireReply acquireReply
	// notice wraps update, an UPDATE or DELETE of holdings of the key $1,
	// into a statement that notifies the key's waiters when it commits if
	// a row it changed has ended (the expression ended, on the row as
	// changed, says), and reports the rows it changed as update does; nil
	// on dialects without notifications.
	notice func(update, ended string) string
	// releaseOne wraps update, a mutex's release of the key $1 by the
	// owner $3 (between commas), into a statement that notifies, when it
	// commits, one listener of the key's waiters if the release ended the
	// lease (ended) and reports the rows it changed, as notice does; nil
	// where the dialect notifies all or none (see marks.go).
	releaseOne func(update, ended string) string
	// passOn notifies the next listener of the key $1's waiters if the
	// key is free: a listener named by a
	// release that had no waiter left for the key passes the turn on.
	passOn string
	// handOver is a fair release of the key $1 by its only holder $2 ($3
	// between commas) that grants the lease to the oldest live waiter in
	// one statement and notifies it, selecting the waiter (no row: the
	// release is left to fairRelease); "" where a transaction does it.
	handOver string
	// head selects the oldest live waiter in the key $1's line and how
	// long its place lasts (µs), taking the places that ended out of the
	// line in the same statement; "" where a DELETE does that first (see
	// txn.head).
	head string
	// turn notifies the waiter $2 (between commas, or '' for any) that
	// the key $1 was handed to it; "" on dialects without notifications.
	turn string
	// byInsertID: the statements return a token as LAST_INSERT_ID(expr),
	// read from the result, not with a RETURNING clause.
	byInsertID bool
	// countsChanged: RowsAffected counts the rows an UPDATE changed, not
	// those it matched.
	countsChanged bool
	// prepares: hot statements are prepared on the pool (see prepared.go);
	// false where the driver keeps its own per-connection cache.
	prepares bool
	// tx: the options of a transaction on a key's row (see beginTx).
	tx *sql.TxOptions
	// sweep: the statements that delete the lease rows free for long
	// enough (see reclaim.go), given the condition free.
	sweep func(free string) sweepTexts
	// columns are the lease table's columns of this dialect alone, as
	// ADD COLUMN takes them.
	columns []string
	// mark marks the key $1 as watched for $2 µs from now, unless it is
	// marked for $3 µs more already, and lists the listener $4 (a comma
	// after it) among the key's wakers (see marks.go); "" where releases
	// notify nobody.
	mark string
	// watched is the condition on a lease row that a waiter's mark lasts
	// (see mark): a release notifies, and the sweep keeps the row, only
	// while it holds; "" where there are no marks.
	watched string
	// identity selects what names the database (see Backend.identity).
	identity string
	// listens: waiters can be notified (Listener); pgx's is found by New.
	listens bool
	// native: the connection-scoped locks (conn.go); nil where the
	// database has none.
	native func(b *Backend) nativeLocks
}

// columnTypes are the column types of the holds and queue tables.
type columnTypes struct {
	key, owner, kind, text, tail string
}

// placeholderStyle is how a dialect writes the statements' $n.
type placeholderStyle int

const (
	numbered   placeholderStyle = iota // $n, as written
	questioned                         // ?n
	positional                         // ?, arguments repeated in order
)

// acquireReply is how a mutex's acquire statement answers.
type acquireReply int

const (
	// replyRow: one row (token, left, kind), granted or refused: a
	// granted token, never 0 (sequences start at 1), or 0 for a refusal.
	replyRow acquireReply = iota
	// replyInsertID: the token as LAST_INSERT_ID, 0 when refused; a
	// refusal reads the row with a second statement.
	replyInsertID
	// replyReturning: the token with RETURNING, no row when refused; a
	// refusal reads the row with a second statement.
	replyReturning
)

// dialects are the dialects sqllock speaks.
var dialects = map[Dialect]*dialect{Postgres: postgresDialect, MySQL: mysqlDialect, SQLite: sqliteDialect}

// lookup returns d's description.
func lookup(d Dialect) (*dialect, error) {
	if x, ok := dialects[d]; ok {
		return x, nil
	}
	return nil, fmt.Errorf("sqllock: unknown dialect %q", d)
}

// schema is the DDL of table's lease, holds and queue tables and counter.
func (d *dialect) schema(table string) []string {
	return append([]string{d.lease(table), holdsSchema(d, table), queueSchema(d, table)}, d.counter(table)...)
}

// stmt is a query prepared for a dialect: written with PostgreSQL's
// numbered placeholders $1..$9 and the markers {now} (the database clock),
// {newtoken}, {next}, {returning} and {keep} (see dialect), {table} (the
// lease table), {holds} (the holds table), {queue} (the queue table),
// {seq} (the token sequence) and {channel} (the notification channel),
// rewritten for MySQL to positional ? with the arguments repeated in
// order. The markers cannot occur in a valid table name, and the names go
// in last, so no rewrite touches them.
type stmt struct {
	query string
	order []int // MySQL: the argument index of each ?
}

var placeholder = regexp.MustCompile(`\$[1-9]`)

// prepare rewrites query, the text of one statement, for d and table. A
// prepared query is never prepared again: compose the texts first.
func prepare(d *dialect, table, query string) stmt {
	query = strings.NewReplacer("{newtoken}", d.newToken, "{next}", d.next, "{returning}", d.returning, "{keep}", d.keep).Replace(query)
	query = strings.ReplaceAll(query, "{now}", d.now)
	query = d.rename(query)
	var s stmt
	switch d.placeholders {
	case positional:
		query = placeholder.ReplaceAllStringFunc(query, func(p string) string {
			s.order = append(s.order, int(p[1]-'1'))
			return "?"
		})
	case questioned:
		query = placeholder.ReplaceAllStringFunc(query, func(p string) string { return "?" + p[1:] })
	}
	s.query = strings.NewReplacer("{table}", table, "{holds}", holdsTable(table), "{queue}", queueTable(table), "{seq}", sequence(table), "{channel}", channel(table)).Replace(query)
	return s
}

// noticed prepares update (see dialect.notice) to notify the key's
// waiters where d can; as it is otherwise.
func noticed(d *dialect, table, update, ended string) stmt {
	if d.notice == nil {
		return prepare(d, table, update)
	}
	return prepare(d, table, d.notice(update, ended))
}

// sweepTexts are a dialect's statements that delete the lease rows due
// (see reclaim.go): leases deletes them; on a dialect whose tokens count
// from a floor row, floor creates that row, lockFloor locks it and reads
// its token, top reads the highest token of the rows due, and raise
// lifts the floor above them (to $1, or to what it selects itself).
type sweepTexts struct {
	floor, lockFloor, top, raise, leases string
}

// args orders args for s.
func (s stmt) args(args ...any) []any {
	if s.order == nil {
		return args
	}
	out := make([]any, len(s.order))
	for i, j := range s.order {
		out[i] = args[j]
	}
	return out
}
