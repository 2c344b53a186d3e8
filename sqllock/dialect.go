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
//	name        the key
//	owners      the owner tokens of the holds, each followed by a comma
//	            after a leading one (",a,b,"); '' when free
//	token       the fencing counter: the last token issued for the name;
//	            rows are never deleted, so tokens survive restarts
//	holds       the number of owners: re-entrant holds; 0 when free
//	reentry     SHA-256 (hex) of the lease's re-entrant identity, or ''
//	expires_us  the lease's end, microseconds since the Unix epoch by the
//	            database's clock (never a client's)
//	since_us    when the current holding began, same clock
//	meta        the holder's metadata, a JSON object
//	last_owner  the owner that released last, so that a repeated release
//	            reports success
//
// A second table, the same name followed by "_holds", keeps one row per
// holder of the read-write locks and semaphores (see holdsSchema in the
// source: name, owner, kind, token, expires_us, released_us, meta; primary
// key (name, owner)). The DDL is two statements separated by ";\n".
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
	return lease + ";\n" + holdsSchema(d, table), nil
}

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
	reentry    TEXT NOT NULL DEFAULT ''
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
	reentry    VARBINARY(64) NOT NULL DEFAULT ''
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
	reentry    TEXT NOT NULL DEFAULT ''
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

// stmt is a query prepared for a dialect: written with PostgreSQL's
// numbered placeholders $1..$9 and the markers {now} (the database clock),
// {table} (the lease table), {holds} (the holds table) and {channel} (the
// notification channel), rewritten for MySQL to positional ? with the
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
	s.query = strings.NewReplacer("{table}", table, "{holds}", holdsTable(table), "{channel}", channel(table)).Replace(query)
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
