package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// advisoryLocks are PostgreSQL's session advisory locks, the native locks
// of connection-scoped mode there: the key's lock is AdvisoryLockKey(key)
// (objsubid 1 in pg_locks), the holding's mark the two-number lock (hi,
// lo) (objsubid 2), and idle_session_timeout (PostgreSQL 14) ends a
// holder that stops renewing. The usual attempt is one statement: the
// lock, and if granted the row and the mark.
type advisoryLocks struct{ b *Backend }

// minPostgres is the oldest PostgreSQL (server_version_num) with
// idle_session_timeout, which connection-scoped locks need.
const minPostgres = 140000

// idleMS is PostgreSQL's idle_session_timeout for a lease of ttl.
func idleMS(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

func (n advisoryLocks) prepare(c *connMode) {
	p := func(q string) stmt { return prepare(n.b.d, n.b.table, q) }
	// The native lock is held: the next token, whatever the row said,
	// unless the row was last taken as another family (see kinds.go).
	// $1 name, $2 the owner between commas, $3 ttl (µs), $4 meta, $5 the
	// idle limit (ms), $6 and $7 the mark.
	const take = `INSERT INTO {table} AS t (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $2, {newtoken}, 1, {now} + $3, {now}, $4, '')
	ON CONFLICT (name) DO UPDATE SET token = GREATEST(nextval('{seq}'), t.token + 1), owners = $2, holds = 1,
		expires_us = {now} + $3, since_us = {now}, meta = $4, reentry = ''
	WHERE t.kind = 0
	RETURNING t.token, set_config('idle_session_timeout', $5, false) AS setting, pg_try_advisory_lock($6::INT4, $7::INT4) AS marked`
	c.take = p(take)
	// One round trip for the usual attempt: the native lock, and if it is
	// granted the take above, in one statement. The lock is tried first (g
	// is evaluated once, before the INSERT reads it); the subqueries read
	// the row as it was before, for the refusal's wait and for a row of
	// another family, which the INSERT leaves alone (no token: the
	// attempt goes on as two statements). $8 the native key.
	c.grab = p(`WITH g AS MATERIALIZED (SELECT pg_try_advisory_lock($8) AS got),
up AS (` + strings.Replace(take, `VALUES ($1, $2, {newtoken}, 1, {now} + $3, {now}, $4, '')`, `SELECT $1, $2, {newtoken}, 1, {now} + $3, {now}, $4, '' FROM g WHERE g.got`, 1) + `)
SELECT g.got, pg_backend_pid(), up.token, COALESCE(up.marked, false), ` + connRow + `
FROM g LEFT JOIN up ON true`)
	// $1 name, $2 the owner between commas, $3 ttl (µs), $4 idle limit (ms).
	c.refresh = p(`WITH u AS (UPDATE {table} SET expires_us = {now} + $3 WHERE name = $1 AND owners = $2 RETURNING 1)
SELECT set_config('idle_session_timeout', $4, false)`)
	// $1 name, $2 owner, $3 the owner between commas, $4 the native key,
	// $5 and $6 the mark. The notice goes out while a waiter's mark on
	// the row lasts (see marks.go), whether or not this backend listens:
	// waiters in other processes may.
	c.release = p(`WITH r AS (` + connFree + ` RETURNING ` + n.b.d.watched + ` AS watched)
SELECT pg_advisory_unlock($4), pg_advisory_unlock($5::INT4, $6::INT4), set_config('idle_session_timeout', '0', false),
	(SELECT count(pg_notify('{channel}', $1)::TEXT) FROM r WHERE watched)`)
}

// checkServer refuses, once, a PostgreSQL older than 14, which has no
// idle_session_timeout.
func (n advisoryLocks) checkServer(ctx context.Context) error {
	c := n.b.conns
	c.mu.Lock()
	ok := c.serverOK
	c.mu.Unlock()
	if ok {
		return nil
	}
	var version int
	if err := n.b.db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::INTEGER`).Scan(&version); err != nil {
		return fmt.Errorf("sqllock: acquire: %w", err)
	}
	if err := postgresForConnScope(version); err != nil {
		return err
	}
	c.mu.Lock()
	c.serverOK = true
	c.mu.Unlock()
	return nil
}

// postgresForConnScope refuses a server_version_num below minPostgres.
func postgresForConnScope(version int) error {
	if version < minPostgres {
		return fmt.Errorf("sqllock: WithConnectionScope needs PostgreSQL 14 or newer (idle_session_timeout); the server is version %d.%d: %w",
			version/10000, version%10000, errors.ErrUnsupported)
	}
	return nil
}

func (n advisoryLocks) try(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, meta string) (a nativeAttempt, err error) {
	c := n.b.conns
	args := c.take.args(req.Key, listed(req.Owner), micros(req.TTL), meta, idleMS(req.TTL), l.mark.hi, l.mark.lo, AdvisoryLockKey(req.Key))
	err = conn.QueryRowContext(ctx, c.grab.query, args...).Scan(&a.got, &a.server, &a.taken, &a.marked, &a.left, &a.kind)
	return a, err
}

func (n advisoryLocks) take(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, meta string, a *nativeAttempt) (int64, error) {
	c := n.b.conns
	var (
		token   int64
		setting string
	)
	args := c.take.args(req.Key, listed(req.Owner), micros(req.TTL), meta, idleMS(req.TTL), l.mark.hi, l.mark.lo)
	err := conn.QueryRowContext(ctx, c.take.query, args...).Scan(&token, &setting, &a.marked)
	if errors.Is(err, sql.ErrNoRows) { // a row of another family, taken meanwhile
		return 0, nil
	}
	return token, err
}

func (n advisoryLocks) refresh(ctx context.Context, l *connLease, ttl time.Duration) error {
	c := n.b.conns
	var setting string
	return l.conn.QueryRowContext(ctx, c.refresh.query, c.refresh.args(l.id.Key, listed(l.id.Owner), micros(ttl), idleMS(ttl))...).Scan(&setting)
}

func (n advisoryLocks) release(ctx context.Context, l *connLease) (unlocked bool, err error) {
	c := n.b.conns
	var (
		setting  string
		notified int64
		unmarked bool
	)
	args := c.release.args(l.id.Key, l.id.Owner, listed(l.id.Owner), AdvisoryLockKey(l.id.Key), l.mark.hi, l.mark.lo)
	err = l.conn.QueryRowContext(ctx, c.release.query, args...).Scan(&unlocked, &unmarked, &setting, &notified)
	return unlocked, err
}

func (n advisoryLocks) holders(ctx context.Context, leases []*connLease) (map[*connLease]bool, error) {
	pids := make([]int64, len(leases))
	for i, l := range leases {
		pids[i] = l.server
	}
	rows, err := n.b.db.QueryContext(ctx, `SELECT pid, classid::BIGINT, objid::BIGINT, objsubid FROM pg_locks
WHERE locktype = 'advisory' AND objsubid IN (1, 2) AND granted AND pid = ANY($1::BIGINT[])`, pids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type lock struct{ pid, hi, lo, sub int64 }
	have := make(map[lock]bool)
	for rows.Next() {
		var k lock
		if err := rows.Scan(&k.pid, &k.hi, &k.lo, &k.sub); err != nil {
			return nil, err
		}
		have[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	held := make(map[*connLease]bool, len(leases))
	for _, l := range leases {
		k := uint64(AdvisoryLockKey(l.id.Key))
		held[l] = have[lock{l.server, int64(k >> 32), int64(k & 0xffffffff), 1}] && have[lock{l.server, l.mark.hi, l.mark.lo, 2}]
	}
	return held, nil
}

func (n advisoryLocks) held(ctx context.Context, key string) (bool, error) {
	var held bool
	k := uint64(AdvisoryLockKey(key))
	err := n.b.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
AND objsubid = 1 AND granted AND classid::BIGINT = $1 AND objid::BIGINT = $2)`, int64(k>>32), int64(k&0xffffffff)).Scan(&held)
	return held, err
}

func (n advisoryLocks) endHolder(ctx context.Context, key string) error {
	k := uint64(AdvisoryLockKey(key))
	_, err := n.b.db.ExecContext(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND classid::BIGINT = $1 AND objid::BIGINT = $2`,
		int64(k>>32), int64(k&0xffffffff))
	return err
}
