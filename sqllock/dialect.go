package sqllock

import (
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
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

// Column sizes of the MySQL schema, which needs bounded key columns.
const (
	maxKeyBytes   = 1024 // distlock.MaxKeyLen
	maxOwnerBytes = 255
)

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
// A table made by an older version lacks the columns kind, lim or queued,
// the queue table, or the counter: New's backend adds them on first use; with [WithoutSchema],
// run [Migration] first, with every client of the table stopped.
//
// It returns an error for an unknown dialect or a table name that is not
// one or two (schema-qualified) SQL identifiers of at most 57 characters.
func Schema(d Dialect, table string) (string, error) {
	if err := checkTable(table); err != nil {
		return "", err
	}
	lease := leaseSchema(d, table)
	if lease == "" {
		return "", fmt.Errorf("sqllock: unknown dialect %q", d)
	}
	return strings.Join(append([]string{lease, holdsSchema(d, table), queueSchema(d, table)}, counterSchema(d, table)...), ";\n"), nil
}

// Migration returns the statements, separated by ";\n", that bring a
// lease table made by an older version (without the columns kind, lim or
// queued, the queue table or the token counter) to the current [Schema].
// Each adds one thing: run them once, skipping the ALTER TABLE of a
// column the table has already (a table of the version before fair locks
// lacks queued only), with every client of the table stopped: older
// clients neither delete rows nor know the counter or the line, so the
// two must not share a table.
func Migration(d Dialect, table string) (string, error) {
	if _, err := Schema(d, table); err != nil {
		return "", err
	}
	return strings.Join(append(append(addColumns(table), queueSchema(d, table)), counterSchema(d, table)...), ";\n"), nil
}

// addColumns adds the columns that versions before kinds were enforced
// (kind, lim) and before fair locks (queued) lacked.
func addColumns(table string) []string {
	return []string{
		`ALTER TABLE ` + table + ` ADD COLUMN kind INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE ` + table + ` ADD COLUMN lim INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE ` + table + ` ADD COLUMN queued INTEGER NOT NULL DEFAULT 0`,
	}
}

// counterSchema creates the table's token counter (see [Schema]) and
// raises it above every token the table holds, which matters only for a
// table whose rows counted per key alone.
func counterSchema(d Dialect, table string) []string {
	switch d {
	case Postgres:
		seq := sequence(table)
		return []string{
			`CREATE SEQUENCE IF NOT EXISTS ` + seq,
			// The last value drawn: last_value once is_called.
			`SELECT setval('` + seq + `', m) FROM (SELECT max(token) AS m FROM ` + table + `) x
	WHERE m > (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ` + seq + `)`,
		}
	case MySQL:
		return []string{`INSERT IGNORE INTO ` + table + ` (name, owners, meta) VALUES ('', '', '')`}
	default:
		return []string{`INSERT OR IGNORE INTO ` + table + ` (name) VALUES ('')`}
	}
}

// sequence names the PostgreSQL sequence of a lease table's tokens.
func sequence(table string) string { return table + "_seq" }

func leaseSchema(d Dialect, table string) string {
	switch d {
	case Postgres:
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
	queued     INTEGER NOT NULL DEFAULT 0
)`
	case MySQL:
		// VARBINARY: keys and owners compare byte for byte, whatever the
		// server's default collation.
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name       VARBINARY(` + strconv.Itoa(maxKeyBytes) + `) NOT NULL PRIMARY KEY,
	owners     BLOB NOT NULL,
	token      BIGINT NOT NULL DEFAULT 0,
	holds      INT NOT NULL DEFAULT 0,
	expires_us BIGINT NOT NULL DEFAULT 0,
	since_us   BIGINT NOT NULL DEFAULT 0,
	meta       TEXT NOT NULL,
	last_owner VARBINARY(` + strconv.Itoa(maxOwnerBytes) + `) NOT NULL DEFAULT '',
	reentry    VARBINARY(64) NOT NULL DEFAULT '',
	kind       INTEGER NOT NULL DEFAULT 0,
	lim        INTEGER NOT NULL DEFAULT 0,
	queued     INTEGER NOT NULL DEFAULT 0
) ENGINE=InnoDB`
	case SQLite:
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
	}
	return ""
}

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

// nowUS is the database clock in microseconds since the Unix epoch. Every
// expiry is set and judged with it: no client clock enters the table.
func nowUS(d Dialect) string {
	switch d {
	case Postgres:
		// now() is the statement's start in autocommit: a statement that
		// waited on a row lock sets an earlier expiry, never a later one.
		return `(EXTRACT(EPOCH FROM now())*1000000)::BIGINT`
	case MySQL:
		return `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
	default:
		return `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
	}
}

// newToken is the first token of a key that has no row: the next value of
// the table's sequence on PostgreSQL; one above the floor row's elsewhere.
// MySQL reads the floor row under a shared lock, which the sweeper's
// exclusive one waits for: a floor read before the sweeper raised it
// cannot meet the deletion of a row it should have been above.
func newToken(d Dialect) string {
	switch d {
	case Postgres:
		return `nextval('{seq}')`
	case MySQL:
		return `(SELECT COALESCE(MAX(f.token), 0) + 1 FROM (SELECT token FROM {table} WHERE name = '' LOCK IN SHARE MODE) f)`
	default:
		return `(SELECT COALESCE(MAX(token), 0) + 1 FROM {table} WHERE name = '')`
	}
}

// stmt is a query prepared for a dialect: written with PostgreSQL's
// numbered placeholders $1..$9 and the markers {now} (the database clock),
// {newtoken} (see newToken), {table} (the lease table), {holds} (the holds
// table), {queue} (the queue table), {seq} (the token sequence) and {channel} (the notification
// channel), rewritten for MySQL to positional ? with the
// arguments repeated in order. The markers cannot occur in a valid table
// name, and the names go in last, so no rewrite touches them.
type stmt struct {
	query string
	order []int // MySQL: the argument index of each ?
}

var placeholder = regexp.MustCompile(`\$[1-9]`)

// prepare rewrites query, the text of one statement, for d and table. A
// prepared query is never prepared again: compose the texts first.
func prepare(d Dialect, table, query string) stmt {
	query = strings.ReplaceAll(query, "{newtoken}", newToken(d))
	query = strings.ReplaceAll(query, "{now}", nowUS(d))
	switch d { // the same functions under other names
	case Postgres:
		query = strings.ReplaceAll(query, "INSTR(", "strpos(")
	case SQLite:
		query = strings.ReplaceAll(query, "GREATEST(", "max(")
	}
	var s stmt
	switch d {
	case MySQL:
		query = placeholder.ReplaceAllStringFunc(query, func(p string) string {
			s.order = append(s.order, int(p[1]-'1'))
			return "?"
		})
	case SQLite:
		query = placeholder.ReplaceAllStringFunc(query, func(p string) string { return "?" + p[1:] })
	}
	s.query = strings.NewReplacer("{table}", table, "{holds}", holdsTable(table), "{queue}", queueTable(table), "{seq}", sequence(table), "{channel}", channel(table)).Replace(query)
	return s
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
