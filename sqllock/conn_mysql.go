package sqllock

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// namedLocks are MySQL's named locks (GET_LOCK), the native locks of
// connection-scoped mode there: the key's lock is NativeLockName(key),
// the holding's mark the lock mark.name(), and wait_timeout ends a holder
// that stops renewing. An attempt is one statement for the locks, and
// one for the row once they are granted.
type namedLocks struct{ b *Backend }

// idleSeconds is MySQL's wait_timeout for a lease of ttl.
func idleSeconds(ttl time.Duration) int64 { return int64((ttl + time.Second - 1) / time.Second) }

func (n namedLocks) prepare(c *connMode) {
	p := func(q string) stmt { return prepare(n.b.d, n.b.table, q) }
	// $1 name, $2 the native lock, $3 the mark: 0 refused, 1 granted
	// without the mark, 2 both; the refusal's remaining lease and the
	// row's family.
	c.acquire = p(`SELECT CASE WHEN GET_LOCK($2, 0) = 1 THEN 1 + COALESCE(GET_LOCK($3, 0), 0) ELSE 0 END, CONNECTION_ID(), ` + connRow)
	// The native lock is held: the next token, whatever the row said,
	// unless the row was last taken as another family (see kinds.go).
	// LAST_INSERT_ID: the token, 0 for a row of another family. $1 name,
	// $2 the owner between commas, $3 ttl (µs), $4 meta.
	c.take = p(`INSERT INTO {table} (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $2, LAST_INSERT_ID({newtoken}), 1, {now} + $3, {now}, $4, '')
	ON DUPLICATE KEY UPDATE token = IF(kind <> 0, token + LAST_INSERT_ID(0), LAST_INSERT_ID(token + 1)),
		owners = IF(kind <> 0, owners, $2), holds = IF(kind <> 0, holds, 1),
		expires_us = IF(kind <> 0, expires_us, {now} + $3), since_us = IF(kind <> 0, since_us, {now}),
		meta = IF(kind <> 0, meta, $4), reentry = IF(kind <> 0, reentry, '')`)
	// $1 name, $2 the owner between commas, $3 ttl (µs).
	c.refresh = p(`UPDATE {table} SET expires_us = {now} + $3 WHERE name = $1 AND owners = $2`)
	// $1 name, $2 owner, $3 the owner between commas.
	c.release = p(connFree)
	// $1 the native lock, $2 the mark.
	c.unset = p(`SELECT RELEASE_LOCK($1), RELEASE_LOCK($2)`)
}

func (namedLocks) checkServer(context.Context) error { return nil }

func (n namedLocks) try(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, _ string) (a nativeAttempt, err error) {
	c := n.b.conns
	var granted int64
	err = conn.QueryRowContext(ctx, c.acquire.query, c.acquire.args(req.Key, NativeLockName(req.Key), l.mark.name())...).Scan(&granted, &a.server, &a.left, &a.kind)
	a.got, a.marked = granted > 0, granted == 2
	return a, err
}

func (n namedLocks) take(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, meta string, _ *nativeAttempt) (int64, error) {
	c := n.b.conns
	l.idle = idleSeconds(req.TTL)
	if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(l.idle, 10)); err != nil {
		return 0, err
	}
	res, err := conn.ExecContext(ctx, c.take.query, c.take.args(req.Key, listed(req.Owner), micros(req.TTL), meta)...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (n namedLocks) refresh(ctx context.Context, l *connLease, ttl time.Duration) error {
	c := n.b.conns
	if s := idleSeconds(ttl); s != l.idle {
		if _, err := l.conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(s, 10)); err != nil {
			return err
		}
		l.idle = s
	}
	_, err := l.conn.ExecContext(ctx, c.refresh.query, c.refresh.args(l.id.Key, listed(l.id.Owner), micros(ttl))...)
	return err
}

func (n namedLocks) release(ctx context.Context, l *connLease) (bool, error) {
	c := n.b.conns
	if _, err := l.conn.ExecContext(ctx, c.release.query, c.release.args(l.id.Key, l.id.Owner, listed(l.id.Owner))...); err != nil {
		return false, err
	}
	var key, mark sql.NullInt64
	if err := l.conn.QueryRowContext(ctx, c.unset.query, c.unset.args(NativeLockName(l.id.Key), l.mark.name())...).Scan(&key, &mark); err != nil {
		return false, err
	}
	_, err := l.conn.ExecContext(ctx, "SET SESSION wait_timeout = DEFAULT")
	return key.Int64 == 1, err
}

func (n namedLocks) holders(ctx context.Context, leases []*connLease) (map[*connLease]bool, error) {
	cols := make([]string, 0, 2*len(leases))
	args := make([]any, 0, 2*len(leases))
	ids := make([]sql.NullInt64, 2*len(leases))
	dest := make([]any, 2*len(leases))
	for i, l := range leases {
		cols = append(cols, "IS_USED_LOCK(?)", "IS_USED_LOCK(?)")
		args = append(args, NativeLockName(l.id.Key), l.mark.name())
		dest[2*i], dest[2*i+1] = &ids[2*i], &ids[2*i+1]
	}
	if err := n.b.db.QueryRowContext(ctx, "SELECT "+strings.Join(cols, ", "), args...).Scan(dest...); err != nil {
		return nil, err
	}
	held := make(map[*connLease]bool, len(leases))
	for i, l := range leases {
		key, mark := ids[2*i], ids[2*i+1]
		held[l] = key.Valid && mark.Valid && key.Int64 == mark.Int64
	}
	return held, nil
}

func (n namedLocks) held(ctx context.Context, key string) (bool, error) {
	var held bool
	err := n.b.db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?) IS NOT NULL`, NativeLockName(key)).Scan(&held)
	return held, err
}

func (n namedLocks) endHolder(ctx context.Context, key string) error {
	name := NativeLockName(key)
	var failed int64 // a connection that KILL failed to end
	for {
		var id sql.NullInt64
		if err := n.b.db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, name).Scan(&id); err != nil || !id.Valid {
			return err
		}
		// KILL fails on a connection that ended meanwhile: only a second
		// failure on the same one is an error.
		if _, err := n.b.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id.Int64, 10)); err != nil {
			if failed == id.Int64 {
				return err
			}
			failed = id.Int64
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
