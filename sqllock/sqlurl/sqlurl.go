// Package sqlurl registers sqllock's URL schemes with distlock.Open, and
// brings in the SQL drivers they need: pgx (PostgreSQL),
// go-sql-driver/mysql (MySQL, MariaDB) and modernc.org/sqlite (SQLite,
// pure Go). Package sqllock itself imports only database/sql, so a program
// that passes its own *sql.DB to sqllock.New builds no driver it does not
// use; import this package (as `import _ ".../sqllock/sqlurl"`) to open
// backends from URLs:
//
//	postgres://[user[:pass]@]host[:port]/db[?pgx options][&table=T][&lock=connection]
//	postgresql://…                              (the same)
//	mysql://[user[:pass]@]host[:port]/db[?driver options][&table=T][&lock=connection]
//	sqlite:///absolute/path/to/file.db[?table=T]
//
// The query option table names the lease table (default
// sqllock.DefaultTable); lock=connection selects connection-scoped locks
// (sqllock.WithConnectionScope; lock=table, the default, the lease
// table); the others go to the driver. A mysql:// URL
// becomes the driver's DSN user:pass@tcp(host:port)/db?options, with
// parseTime off and a dial timeout of [DefaultMySQLDialTimeout] unless the
// URL sets timeout; a postgres:// URL gets a connect_timeout of
// [DefaultPostgresConnectTimeout] unless it sets one. A sqlite:// file is opened in WAL mode with a busy
// timeout of 10s, so that several processes on one host share it, and
// with synchronous FULL, so that a commit, and the fencing token it
// issued, survives a power loss (NORMAL, WAL's usual setting, can lose the
// last commits, and a token could then be issued twice); for a lock
// table the cost of a sync per commit is small. SQLite does not
// coordinate processes on different machines (a file on a network share
// included). A PostgreSQL backend notifies its waiters of releases
// (sqllock.WithListener with package pglisten): it keeps one connection of
// its pool listening once a waiter waits. The backend is opened with a
// ping, so a URL that cannot reach its database fails at once; errors
// never show the password.
package sqlurl

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// DefaultMySQLDialTimeout is the driver's dial timeout (its DSN option
// timeout) for a mysql:// URL that does not set one: without it, a host
// that does not answer holds Open for the kernel's minutes of retries,
// whatever the context says.
const DefaultMySQLDialTimeout = 5 * time.Second

// DefaultPostgresConnectTimeout bounds each connection attempt (pgx's
// connect_timeout) of a postgres:// URL that does not set one, for the
// same reason: a context without a deadline would otherwise wait out the
// kernel's retries on a host that does not answer.
const DefaultPostgresConnectTimeout = 5 * time.Second

func init() {
	for _, s := range []string{"postgres", "postgresql", "mysql", "sqlite"} {
		distlock.Register(s, OpenURL)
	}
}

// Open is OpenURL under its former name.
//
// Deprecated: use [OpenURL], named as every backend's opener is.
func Open(ctx context.Context, u *url.URL) (driver.Backend, error) { return OpenURL(ctx, u) }

// OpenURL opens a backend from one of the URL forms of the package doc.
// The backend closes its *sql.DB when it is closed.
func OpenURL(ctx context.Context, u *url.URL) (driver.Backend, error) {
	driverName, dsn, table, connScope, err := parse(u)
	if err != nil {
		return nil, err
	}
	dialect := map[string]sqllock.Dialect{"pgx": sqllock.Postgres, "mysql": sqllock.MySQL, "sqlite": sqllock.SQLite}[driverName]
	if _, err := sqllock.Schema(dialect, table); err != nil { // a bad table name, before connecting
		return nil, invalid(u, "%v", err)
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, invalid(u, "%v", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqllock: %s: %w", u.Redacted(), err)
	}
	opts := []sqllock.Option{sqllock.WithDialect(dialect), sqllock.WithTable(table), sqllock.WithOwnedDB()}
	if dialect == sqllock.Postgres {
		opts = append(opts, sqllock.WithListener(pglisten.New(db)))
	}
	if connScope {
		opts = append(opts, sqllock.WithConnectionScope())
	}
	b, err := sqllock.New(db, opts...)
	if err != nil {
		db.Close()
		return nil, invalid(u, "%v", err)
	}
	return b, nil
}

func invalid(u *url.URL, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", distlock.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, args...))
}

// parse turns u into a database/sql driver name and DSN, and the table.
func parse(u *url.URL) (driverName, dsn, table string, connScope bool, err error) {
	driverName, dsn, table, connScope, err = parseURL(u)
	if err == nil && connScope && driverName == "sqlite" {
		err = invalid(u, "lock=connection: SQLite has no connection-scoped locks")
	}
	return driverName, dsn, table, connScope, err
}

func parseURL(u *url.URL) (driverName, dsn, table string, connScope bool, err error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", "", false, invalid(u, "query: %v", err)
	}
	table = sqllock.DefaultTable
	if q.Has("table") {
		table = q.Get("table")
		q.Del("table")
	}
	if q.Has("lock") {
		switch q.Get("lock") {
		case "table":
		case "connection":
			connScope = true
		default:
			return "", "", "", false, invalid(u, "lock=%q: want table or connection", q.Get("lock"))
		}
		q.Del("lock")
	}
	v := *u
	v.RawQuery = q.Encode()
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		if u.Host == "" {
			return "", "", "", false, invalid(u, "no host")
		}
		if !q.Has("connect_timeout") {
			q.Set("connect_timeout", strconv.Itoa(int(DefaultPostgresConnectTimeout/time.Second)))
			v.RawQuery = q.Encode()
		}
		return "pgx", v.String(), table, connScope, nil
	case "mysql":
		if u.Host == "" {
			return "", "", "", false, invalid(u, "no host")
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "3306")
		}
		db := strings.TrimPrefix(u.Path, "/")
		if db == "" || strings.Contains(db, "/") {
			return "", "", "", false, invalid(u, "want one database name after the host")
		}
		user := ""
		if u.User != nil {
			user = u.User.Username()
			if pass, ok := u.User.Password(); ok {
				user += ":" + pass
			}
			user += "@"
		}
		if !q.Has("timeout") {
			q.Set("timeout", DefaultMySQLDialTimeout.String())
		}
		dsn = user + "tcp(" + host + ")/" + db
		dsn += "?" + q.Encode()
		return "mysql", dsn, table, connScope, nil
	case "sqlite":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || len(u.Path) < 2 {
			return "", "", "", false, invalid(u, "want sqlite:///absolute/path/to/file.db")
		}
		if len(q) > 0 {
			return "", "", "", false, invalid(u, "unknown option(s) %v", q)
		}
		return "sqlite", "file:" + u.Path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)", table, connScope, nil
	}
	return "", "", "", false, invalid(u, "scheme %q is not sqllock's", u.Scheme)
}
