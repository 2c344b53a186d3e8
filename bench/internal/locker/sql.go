package locker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/sqllock"
)

// SQL returns the contenders of the SQL scenario on a database of the
// database/sql driver drv ("pgx", "mysql" or "sqlite"): the hand-written
// floor, sqllock's lease table and, where the database has native locks,
// its connection-scoped mode. New takes the DSN as its only address.
func SQL(drv string) []Library {
	libs := []Library{sqlFloor(drv), {
		Name: "distlock (sqllock)", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
		Config: "distlock.New(sqllock.New(db), WithTTL(TTL)), the lease table, defaults otherwise",
		How: "sqllock's lease table: acquire is one upsert whose conditions are judged under the row's lock (free, expired, " +
			"or this owner's), raising the key's token counter and setting the expiry by the database clock; PostgreSQL and " +
			"SQLite return the token with RETURNING, MySQL through LAST_INSERT_ID(expr). Release is one UPDATE that checks " +
			"the owner and marks the row free, keeping its token (rows free for 10s are swept; tokens survive restarts). A waiter " +
			"is woken by the release: pg_notify on PostgreSQL (a backend on pgx listens by itself), whose notice names " +
			"one waiting backend, which has the key for 20 ms; directly within the process on the others, or else by its " +
			"watch's poll of the row.",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			return newSQLLocker(drv, addrs[0], ttl)
		},
	}}
	libs = append(libs, Library{
		Name: "distlock (sqllock, fair)", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
		Config: "distlock.New(sqllock.New(db), WithTTL(TTL), WithFairness())",
		How: "As distlock (sqllock), but a waiter keeps a place in line (a row of the queue table, renewed by each attempt) " +
			"and a fair attempt takes a free lock only if no live waiter queued before it. A release that finds waiters in " +
			"line grants the lock to the oldest in the same transaction (on PostgreSQL, one statement) and wakes that " +
			"waiter only; its next attempt finds the lock its own.",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			return newSQLLocker(drv, addrs[0], ttl, distlock.WithFairness())
		},
	})
	if drv != "sqlite" {
		libs = append(libs, Library{
			Name: "distlock (sqllock, connection-scoped)", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
			Config: "sqllock.New(db, WithConnectionScope())",
			How: "Connection-scoped mode: a connection from the pool takes the native lock (pg_try_advisory_lock, GET_LOCK) " +
				"and, on the same connection, raises the token in the lease table and sets the server's idle limit to the TTL: " +
				"on PostgreSQL in one statement, on MySQL in three; release updates the row, unlocks and restores the session " +
				"(one statement on PostgreSQL, three on MySQL), in exchange for a lock that ends with its connection.",
			New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
				return newSQLLocker(drv, addrs[0], ttl, sqllock.WithConnectionScope())
			},
		}, nativeLock(drv))
	}
	return libs
}

// nativeLock is the database's own lock, held by a session: PostgreSQL's
// pg_advisory_lock, MySQL's GET_LOCK. Each worker has one connection; a
// waiter blocks in the server until the holder's unlock hands it the lock.
// It has no lease and no token: the yardstick of the contended ratios.
func nativeLock(drv string) Library {
	l := &nativeLocker{
		try:     `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`,
		wait:    `SELECT pg_advisory_lock(hashtextextended($1, 0))::TEXT = ''`,
		release: `SELECT pg_advisory_unlock(hashtextextended($1, 0))`,
	}
	name, mod := "pg_advisory_lock (one connection)", "github.com/jackc/pgx/v5"
	if drv == "mysql" {
		// A timeout of a year stands for "wait for ever" on every version.
		l.try, l.wait, l.release = `SELECT GET_LOCK(?, 0) = 1`, `SELECT GET_LOCK(?, 31536000) = 1`, `SELECT RELEASE_LOCK(?) = 1`
		name, mod = "GET_LOCK (one connection)", "github.com/go-sql-driver/mysql"
	}
	return Library{
		Name: name, Module: mod, Kind: Peer, Nodes: 1, Contended: true,
		Config: "one *sql.DB per worker holding one connection (db.Conn); no lease, no token",
		How: "The database's session lock: a worker takes it on its own connection; a waiter's statement blocks in the " +
			"server until the holder unlocks, which grants it at once. One round trip each way, no polling; the lock ends " +
			"with its connection, and nothing fences a holder that was cut off.",
		New: func(ctx context.Context, addrs []string, _ time.Duration) (Locker, error) {
			db, err := sql.Open(drv, addrs[0])
			if err != nil {
				return nil, err
			}
			conn, err := db.Conn(ctx)
			if err != nil {
				return nil, errors.Join(err, db.Close())
			}
			n := *l
			n.db, n.conn = db, conn
			return &n, nil
		},
	}
}

type nativeLocker struct {
	db                 *sql.DB
	conn               *sql.Conn
	try, wait, release string
}

type nativeHeld struct {
	n   *nativeLocker
	key string
}

func (h nativeHeld) Release(ctx context.Context) error {
	var ok bool
	if err := h.n.conn.QueryRowContext(ctx, h.n.release, h.key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("native lock: not held at release")
	}
	return nil
}

func (n *nativeLocker) take(ctx context.Context, query, key string) (Held, error) {
	var ok bool
	if err := n.conn.QueryRowContext(ctx, query, key).Scan(&ok); err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotObtained
	}
	return nativeHeld{n, key}, nil
}

func (n *nativeLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	return n.take(ctx, n.try, key)
}

func (n *nativeLocker) Acquire(ctx context.Context, key string) (Held, error) {
	return n.take(ctx, n.wait, key)
}

func (n *nativeLocker) Close() error { return errors.Join(n.conn.Close(), n.db.Close()) }

// newSQLLocker opens a sqllock backend with the options of sqllock and
// distlock in opts.
func newSQLLocker(drv, dsn string, ttl time.Duration, opts ...any) (Locker, error) {
	db, err := sql.Open(drv, dsn)
	if err != nil {
		return nil, err
	}
	var (
		bopts []sqllock.Option
		copts = []distlock.Option{distlock.WithTTL(ttl)}
	)
	for _, o := range opts {
		switch o := o.(type) {
		case sqllock.Option:
			bopts = append(bopts, o)
		case distlock.Option:
			copts = append(copts, o)
		}
	}
	be, err := sqllock.New(db, bopts...)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &distlockLocker{
		c:     distlock.New(be, copts...),
		close: func() error { return errors.Join(be.Close(), db.Close()) },
	}, nil
}

// sqlFloor is the least a lease lock in a table does: an upsert that
// takes a free or expired row, and a DELETE.
func sqlFloor(drv string) Library {
	return Library{
		Name: "floor: upsert + DELETE", Kind: Floor, Nodes: 1, Role: RoleLock,
		Config: "INSERT … ON CONFLICT/DUPLICATE KEY UPDATE if expired, then DELETE: two round trips, no token, no owner check",
		How: "Not a safe lock: no owner in the row, so DELETE may free someone else's lease, and no fencing token. It is the " +
			"hand-written SQL lock in its barest form, the yardstick of the SQL ×floor ratios.",
		New: func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			db, err := sql.Open(drv, addrs[0])
			if err != nil {
				return nil, err
			}
			f := &sqlFloorLocker{db: db, ttl: ttl.Microseconds()}
			ddl := `CREATE TABLE IF NOT EXISTS bench_floor (name VARCHAR(255) PRIMARY KEY, expires_us BIGINT NOT NULL)`
			now := `(EXTRACT(EPOCH FROM now())*1000000)::BIGINT`
			switch drv {
			case "mysql":
				now = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
				f.acquire = `INSERT INTO bench_floor (name, expires_us) VALUES (?, ` + now + ` + ?)
ON DUPLICATE KEY UPDATE expires_us = IF(expires_us < ` + now + `, VALUES(expires_us), expires_us)`
				f.release = `DELETE FROM bench_floor WHERE name = ?`
			default:
				if drv == "sqlite" {
					now = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
				}
				f.acquire = `INSERT INTO bench_floor (name, expires_us) VALUES ($1, ` + now + ` + $2)
ON CONFLICT (name) DO UPDATE SET expires_us = excluded.expires_us WHERE bench_floor.expires_us < ` + now
				f.release = `DELETE FROM bench_floor WHERE name = $1`
			}
			if _, err := db.ExecContext(ctx, ddl); err != nil {
				return nil, errors.Join(fmt.Errorf("floor table: %w", err), db.Close())
			}
			return f, nil
		},
	}
}

type sqlFloorLocker struct {
	db               *sql.DB
	ttl              int64
	acquire, release string
}

type sqlFloorHeld struct {
	f   *sqlFloorLocker
	key string
}

func (h sqlFloorHeld) Release(ctx context.Context) error {
	_, err := h.f.db.ExecContext(ctx, h.f.release, h.key)
	return err
}

func (f *sqlFloorLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	res, err := f.db.ExecContext(ctx, f.acquire, key, f.ttl)
	if err != nil {
		return nil, err
	}
	// MySQL: 1 inserted, 2 updated, 0 unchanged; the others: 1 or 0.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, errors.Join(ErrNotObtained, err)
	}
	return sqlFloorHeld{f, key}, nil
}

func (f *sqlFloorLocker) Acquire(context.Context, string) (Held, error) { return nil, errCannotWait }

func (f *sqlFloorLocker) Close() error { return f.db.Close() }
