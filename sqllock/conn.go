package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// WithConnectionScope switches the backend to connection-scoped locks,
// on PostgreSQL (session advisory locks) and MySQL or MariaDB (GET_LOCK):
// each holding keeps one connection of the pool for itself and holds the
// database's native lock on it, and the lock ends when that connection
// does. Tokens still come from the lease table, whose row for the key
// also shows the holding to Inspect. New rejects it on SQLite.
//
// The lease's TTL becomes the connection's idle limit on the server
// (idle_session_timeout on PostgreSQL 14 or newer, so the first Acquire on
// an older server fails with an error wrapping errors.ErrUnsupported;
// wait_timeout, in whole seconds rounded up, on MySQL): a holder that
// stops renewing, because it stalled or lost the network, is disconnected
// by the server, which frees the lock. Each renewal is a statement on the
// held connection, never cancelled in flight (that would close the
// connection, and the lock with it): it runs until its context's
// deadline. The backend checks every [WithLossCheck] interval, on one
// pooled connection for all its holdings, that each holding's connection
// still holds its lock; when one does not (the connection was killed, the
// server restarted), the handle ends at once through Grant.Lost. A
// holding's connection is known by a second native lock of a random name
// that it takes beside the key's, not by its id on the server: a
// restarted server gives old ids to new connections.
//
// Use it when locks should end the moment their holder's connection does
// (a crashed holder frees its locks without waiting out a TTL), or to
// coordinate with other code that takes the same native locks (see
// [AdvisoryLockKey] and [NativeLockName]). Keep the table-based default
// for re-entrant locks, for holders that share locks across processes by
// owner, and where a pinned connection per held lock is too dear: count
// one connection per held lock, plus one, in db.SetMaxOpenConns. A key is
// used in one mode only: the two modes do not exclude each other.
// Connection-scoped locks are exclusive, not re-entrant and not fair;
// Close ends them, closing their connections.
func WithConnectionScope() Option { return func(b *Backend) { b.conns = &connMode{} } }

// WithLossCheck sets how often a connection-scoped backend checks that its
// holdings' connections still hold their locks (default 250ms): the
// longest a lost connection goes unnoticed, and the period of one query
// while the backend holds any lock.
func WithLossCheck(every time.Duration) Option { return func(b *Backend) { b.lossCheck = every } }

// DefaultLossCheck is the default interval of [WithLossCheck].
const DefaultLossCheck = 250 * time.Millisecond

// AdvisoryLockKey is the PostgreSQL advisory lock key that a
// connection-scoped backend takes for key: the first eight bytes of
// SHA-256("distlock:" + key), big-endian. pg_locks shows it as classid
// (high 32 bits) and objid (low 32 bits) with objsubid 1.
func AdvisoryLockKey(key string) int64 {
	sum := sha256.Sum256([]byte("distlock:" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// NativeLockName is the MySQL lock name (for GET_LOCK and IS_USED_LOCK)
// that a connection-scoped backend takes for key: "distlock:" and 27
// bytes of SHA-256("distlock:" + key) in hex, within MySQL's 64
// characters. MySQL lock names are server-wide, not per database.
func NativeLockName(key string) string {
	sum := sha256.Sum256([]byte("distlock:" + key))
	return "distlock:" + hex.EncodeToString(sum[:27])
}

// connMode is the state of a connection-scoped backend: the holdings of
// this process, each on its own connection.
type connMode struct {
	mu       sync.Mutex
	leases   map[leaseID]*connLease
	released map[leaseID]time.Time // recent releases, so that a repeat reports success
	checking bool                  // the loss check runs
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	serverOK bool // the server's version was checked

	acquire, grab, take, refresh, release, unset, free, state stmt
}

type leaseID struct{ key, owner string }

// connLease is one connection-scoped holding.
type connLease struct {
	id     leaseID
	conn   *sql.Conn
	server int64 // the connection's id on the server: backend pid or CONNECTION_ID()
	mark   mark  // the second native lock that names this holding
	token  uint64
	idle   int64 // MySQL: the wait_timeout in force, seconds
	lost   chan struct{}
}

// mark is a native lock of a random name that a holding's connection
// takes beside the key's: the server's ids of connections repeat (MySQL's
// connection ids after a restart, PostgreSQL's pids in a new PID
// namespace), but no other connection ever holds this lock, so the loss
// check asks for the connection that holds both. On PostgreSQL it is the
// advisory lock (hi, lo) of two 31-bit numbers (objsubid 2 in pg_locks,
// apart from the keys' single-number locks); on MySQL the lock named
// "distlock-holding:" and 32 hex digits.
type mark struct{ hi, lo int64 }

func newMark() mark { return mark{int64(rand.Int32()), int64(rand.Int32())} }

// name is the mark's MySQL lock name.
func (m mark) name() string { return fmt.Sprintf("distlock-holding:%016x%016x", m.hi, m.lo) }

// rememberRelease is how long a released owner's repeat reports success.
const rememberRelease = time.Minute

// minPostgres is the oldest PostgreSQL (server_version_num) with
// idle_session_timeout, which connection-scoped locks need.
const minPostgres = 140000

// connEngine is the engine of connection-scoped locks: plain mutexes.
type connEngine struct{ b *Backend }

func (connEngine) caps() driver.Capabilities { return driver.Capabilities{Notify: true} }

func (connEngine) accepts(l driver.Lease, fair bool) error {
	switch {
	case l.Kind != driver.Exclusive:
		return fmt.Errorf("sqllock: connection-scoped lock of kind %d: %w", l.Kind, errors.ErrUnsupported)
	case fair:
		return fmt.Errorf("sqllock: fair connection-scoped lock: %w", errors.ErrUnsupported)
	}
	return nil
}

func (e connEngine) acquire(ctx context.Context, req driver.Request, meta string) (driver.Grant, error) {
	return e.b.acquireConn(ctx, req, meta)
}

func (e connEngine) release(ctx context.Context, l driver.Lease) (string, error) {
	return "", e.b.releaseConn(ctx, l)
}

func (e connEngine) refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	cl := e.b.conns.lease(l)
	if cl == nil {
		return 0, driver.ErrNotHeld
	}
	return e.b.refreshConn(ctx, cl, ttl)
}

func (b *Backend) prepareConnStatements() {
	p := func(q string) stmt { return prepare(b.dialect, b.table, q) }
	c := b.conns
	// $1 name, $2 native lock (key or name); refused: the row's remaining
	// lease; and the row's family.
	const row = `(SELECT expires_us - {now} FROM {table} WHERE name = $1), (SELECT kind FROM {table} WHERE name = $1)`
	if b.dialect != Postgres { // PostgreSQL's is grab, below
		// And the holding's mark ($3), once the key's lock is granted:
		// 0 refused, 1 granted without the mark, 2 both.
		c.acquire = p(`SELECT CASE WHEN GET_LOCK($2, 0) = 1 THEN 1 + COALESCE(GET_LOCK($3, 0), 0) ELSE 0 END, CONNECTION_ID(), ` + row)
	}
	// The native lock is held: the next token, whatever the row said,
	// unless the row was last taken as another family (see kinds.go).
	// $1 name, $2 the owner between commas, $3 ttl (µs), $4 meta, $5 the
	// idle limit (PostgreSQL, ms), $6 and $7 the mark (PostgreSQL).
	if b.dialect == Postgres {
		c.take = p(`INSERT INTO {table} AS t (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $2, {newtoken}, 1, {now} + $3, {now}, $4, '')
	ON CONFLICT (name) DO UPDATE SET token = GREATEST(nextval('{seq}'), t.token + 1), owners = $2, holds = 1,
		expires_us = {now} + $3, since_us = {now}, meta = $4, reentry = ''
	WHERE t.kind = 0
	RETURNING t.token, set_config('idle_session_timeout', $5, false), pg_try_advisory_lock($6::INT4, $7::INT4)`)
	} else {
		// LAST_INSERT_ID: the token, 0 for a row of another family.
		c.take = p(`INSERT INTO {table} (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $2, LAST_INSERT_ID({newtoken}), 1, {now} + $3, {now}, $4, '')
	ON DUPLICATE KEY UPDATE token = IF(kind <> 0, token + LAST_INSERT_ID(0), LAST_INSERT_ID(token + 1)),
		owners = IF(kind <> 0, owners, $2), holds = IF(kind <> 0, holds, 1),
		expires_us = IF(kind <> 0, expires_us, {now} + $3), since_us = IF(kind <> 0, since_us, {now}),
		meta = IF(kind <> 0, meta, $4), reentry = IF(kind <> 0, reentry, '')`)
	}
	if b.dialect == Postgres {
		// One round trip for the usual attempt: the native lock, and if
		// it is granted the take above, in one statement. The lock is
		// tried first (g is evaluated once, before the INSERT reads it);
		// the subqueries read the row as it was before, for the refusal's
		// wait and for a row of another family, which the INSERT leaves
		// alone (no token: the attempt goes on as two statements). $8 the
		// native key.
		c.grab = p(`WITH g AS MATERIALIZED (SELECT pg_try_advisory_lock($8) AS got),
up AS (INSERT INTO {table} AS t (name, owners, token, holds, expires_us, since_us, meta, reentry)
	SELECT $1, $2, {newtoken}, 1, {now} + $3, {now}, $4, '' FROM g WHERE g.got
	ON CONFLICT (name) DO UPDATE SET token = GREATEST(nextval('{seq}'), t.token + 1), owners = $2, holds = 1,
		expires_us = {now} + $3, since_us = {now}, meta = $4, reentry = ''
	WHERE t.kind = 0
	RETURNING t.token, set_config('idle_session_timeout', $5, false) AS setting, pg_try_advisory_lock($6::INT4, $7::INT4) AS marked)
SELECT g.got, pg_backend_pid(), up.token, COALESCE(up.marked, false), ` + row + `
FROM g LEFT JOIN up ON true`)
	}
	// $1 name, $2 the owner between commas, $3 ttl (µs), $4 idle limit (ms).
	if b.dialect == Postgres {
		c.refresh = p(`WITH u AS (UPDATE {table} SET expires_us = {now} + $3 WHERE name = $1 AND owners = $2 RETURNING 1)
SELECT set_config('idle_session_timeout', $4, false)`)
	} else {
		c.refresh = p(`UPDATE {table} SET expires_us = {now} + $3 WHERE name = $1 AND owners = $2`)
	}
	// $1 name, $2 owner, $3 the owner between commas; PostgreSQL: $4 the
	// native key, $5 and $6 the mark.
	const free = `UPDATE {table} SET owners = '', holds = 0, expires_us = {now}, last_owner = $2 WHERE name = $1 AND owners = $3`
	c.free = p(free)
	if b.dialect == Postgres {
		// The notice goes out whether or not this backend listens:
		// waiters in other processes may.
		c.release = p(`WITH r AS (` + free + ` RETURNING 1)
SELECT pg_advisory_unlock($4), pg_advisory_unlock($5::INT4, $6::INT4), set_config('idle_session_timeout', '0', false), pg_notify('{channel}', $1)::TEXT`)
	} else {
		c.release = p(free)
		// $1 the native lock, $2 the mark.
		c.unset = p(`SELECT RELEASE_LOCK($1), RELEASE_LOCK($2)`)
	}
	c.state = p(`SELECT owners, last_owner FROM {table} WHERE name = $1`)
}

// nativeKey is what the dialect's native lock is called for key.
func (b *Backend) nativeKey(key string) any {
	if b.dialect == Postgres {
		return AdvisoryLockKey(key)
	}
	return NativeLockName(key)
}

// idleMS is PostgreSQL's idle_session_timeout for a lease of ttl.
func idleMS(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

// idleSeconds is MySQL's wait_timeout for a lease of ttl.
func idleSeconds(ttl time.Duration) int64 { return int64((ttl + time.Second - 1) / time.Second) }

// discard closes conn for good: database/sql drops a connection whose
// Raw callback reports driver.ErrBadConn. The server then ends the
// session and frees its locks.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = conn.Close()
}

// checkServer refuses, once, a PostgreSQL older than 14, which has no
// idle_session_timeout.
func (b *Backend) checkServer(ctx context.Context) error {
	c := b.conns
	c.mu.Lock()
	ok := c.serverOK
	c.mu.Unlock()
	if ok || b.dialect != Postgres {
		return nil
	}
	var version int
	if err := b.db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::INTEGER`).Scan(&version); err != nil {
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

func (b *Backend) acquireConn(ctx context.Context, req driver.Request, meta string) (driver.Grant, error) {
	if req.Reentry != "" {
		return driver.Grant{}, fmt.Errorf("sqllock: re-entrant connection-scoped locks: %w", errors.ErrUnsupported)
	}
	if err := b.checkServer(ctx); err != nil {
		return driver.Grant{}, err
	}
	c := b.conns
	id := leaseID{req.Key, req.Owner}
	c.mu.Lock()
	l, closed := c.leases[id], c.closed
	c.mu.Unlock()
	if closed {
		return driver.Grant{}, errors.New("sqllock: Acquire on a closed backend")
	}
	if l != nil { // a repeat: the same grant, extended
		if _, err := b.refreshConn(ctx, l, req.TTL); err == nil {
			return driver.Grant{Acquired: true, Token: l.token, ValidFor: req.TTL - b.drift(req.TTL), Lost: l.lost}, nil
		}
		// The holding is gone: a new attempt.
	}
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("sqllock: acquire: %w", err)
	}
	var (
		got        bool
		server     int64
		left, kind sql.NullInt64
		taken      sql.NullInt64 // PostgreSQL: the token, if the attempt took the row too
		marked     bool
	)
	l = &connLease{id: id, conn: conn, mark: newMark(), lost: make(chan struct{})}
	args := c.take.args(req.Key, listed(req.Owner), micros(req.TTL), meta, idleMS(req.TTL), l.mark.hi, l.mark.lo)
	if b.dialect == Postgres {
		err = conn.QueryRowContext(ctx, c.grab.query, append(args, b.nativeKey(req.Key))...).Scan(&got, &server, &taken, &marked, &left, &kind)
	} else {
		var granted int64
		err = conn.QueryRowContext(ctx, c.acquire.query, c.acquire.args(req.Key, b.nativeKey(req.Key), l.mark.name())...).Scan(&granted, &server, &left, &kind)
		got, marked = granted > 0, granted == 2
	}
	if err != nil {
		discard(conn) // frees the native lock if the reply was lost
		return driver.Grant{}, fmt.Errorf("sqllock: acquire: %w", err)
	}
	if !got {
		conn.Close()
		g := driver.Grant{}
		if left.Valid {
			g.RetryAfter = max(time.Duration(left.Int64)*time.Microsecond, time.Millisecond)
		}
		return g, nil
	}
	l.server = server
	if kind.Int64 != 0 && !taken.Valid {
		// The row was last taken as another family: the holds table says
		// whether that family still holds the key.
		if err := b.settleKind(ctx, req); err != nil {
			discard(conn)
			return driver.Grant{}, err
		}
	}
	token := taken.Int64
	switch {
	case taken.Valid: // PostgreSQL took the row with the lock
	case b.dialect == Postgres:
		var setting string
		err = conn.QueryRowContext(ctx, c.take.query, args...).Scan(&token, &setting, &marked)
		if errors.Is(err, sql.ErrNoRows) { // a row of another family, taken meanwhile
			discard(conn)
			return driver.Grant{RetryAfter: time.Millisecond}, nil
		}
	default:
		l.idle = idleSeconds(req.TTL)
		_, err = conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(l.idle, 10))
		if err == nil {
			var res sql.Result
			if res, err = conn.ExecContext(ctx, c.take.query, args...); err == nil {
				token, err = res.LastInsertId()
			}
		}
		if err == nil && token == 0 { // a row of another family, taken meanwhile
			discard(conn)
			return driver.Grant{RetryAfter: time.Millisecond}, nil
		}
	}
	if err == nil && !marked {
		err = errors.New("the holding's mark lock was not granted")
	}
	if err != nil {
		discard(conn)
		return driver.Grant{}, fmt.Errorf("sqllock: acquire: %w", err)
	}
	l.token = uint64(token)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		discard(conn)
		return driver.Grant{}, errors.New("sqllock: Acquire on a closed backend")
	}
	if c.leases == nil {
		c.leases = make(map[leaseID]*connLease)
	}
	c.leases[id] = l
	if !c.checking {
		c.checking = true
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go b.checkLoss(c.stop, c.done)
	}
	c.mu.Unlock()
	return driver.Grant{Acquired: true, Token: l.token, ValidFor: req.TTL - b.drift(req.TTL), Lost: l.lost}, nil
}

// drop takes l out of the holdings, if it is still there, closes its
// connection and, unless it was released, reports it lost. It returns
// whether l was there.
func (c *connMode) drop(l *connLease, released bool) bool {
	c.mu.Lock()
	there := c.leases[l.id] == l
	if there {
		delete(c.leases, l.id)
		if released {
			if c.released == nil {
				c.released = make(map[leaseID]time.Time)
			}
			now := time.Now()
			for id, at := range c.released {
				if now.Sub(at) > rememberRelease {
					delete(c.released, id)
				}
			}
			c.released[l.id] = now
		}
	}
	c.mu.Unlock()
	if there && !released {
		close(l.lost)
		discard(l.conn)
	}
	return there
}

func (c *connMode) lease(l driver.Lease) *connLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leases[leaseID{l.Key, l.Owner}]
}

// refreshConn renews l on its connection. A statement cancelled in flight
// ends its connection (the drivers close it), and with it the lock: so the
// renewal runs to ctx's deadline (or for ttl) whatever ctx's cancellation,
// as when Unlock cancels a renewal it no longer needs. A ctx done before
// the call sends nothing.
func (b *Backend) refreshConn(ctx context.Context, l *connLease, ttl time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("sqllock: refresh: %w", err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(ttl)
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	c := b.conns
	args := c.refresh.args(l.id.key, listed(l.id.owner), micros(ttl), idleMS(ttl))
	var err error
	if b.dialect == Postgres {
		var setting string
		err = l.conn.QueryRowContext(ctx, c.refresh.query, args...).Scan(&setting)
	} else {
		if s := idleSeconds(ttl); s != l.idle {
			if _, err = l.conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(s, 10)); err == nil {
				l.idle = s
			}
		}
		if err == nil {
			_, err = l.conn.ExecContext(ctx, c.refresh.query, args...)
		}
	}
	if err != nil {
		// The connection is gone or in an unknown state: closing it
		// ends the holding for sure.
		c.drop(l, false)
		return 0, fmt.Errorf("sqllock: refresh: %v: %w", err, driver.ErrNotHeld)
	}
	return ttl - b.drift(ttl), nil
}

func (b *Backend) releaseConn(ctx context.Context, lease driver.Lease) error {
	c := b.conns
	l := c.lease(lease)
	if l == nil {
		c.mu.Lock()
		_, repeat := c.released[leaseID{lease.Key, lease.Owner}]
		c.mu.Unlock()
		if repeat {
			return nil
		}
		return driver.ErrNotHeld
	}
	var (
		unlocked bool
		err      error
	)
	if b.dialect == Postgres {
		var (
			setting, notified string
			unmarked          bool
		)
		args := c.release.args(lease.Key, lease.Owner, listed(lease.Owner), b.nativeKey(lease.Key), l.mark.hi, l.mark.lo)
		err = l.conn.QueryRowContext(ctx, c.release.query, args...).Scan(&unlocked, &unmarked, &setting, &notified)
	} else {
		if _, err = l.conn.ExecContext(ctx, c.release.query, c.release.args(lease.Key, lease.Owner, listed(lease.Owner))...); err == nil {
			var n, m sql.NullInt64
			if err = l.conn.QueryRowContext(ctx, c.unset.query, c.unset.args(b.nativeKey(lease.Key), l.mark.name())...).Scan(&n, &m); err == nil {
				unlocked = n.Int64 == 1
				_, err = l.conn.ExecContext(ctx, "SET SESSION wait_timeout = DEFAULT")
			}
		}
	}
	if err == nil && unlocked {
		if c.drop(l, true) {
			l.conn.Close() // back to the pool, its session settings restored
		}
		return nil
	}
	if err == nil {
		// The connection no longer held the lock: lost before the call.
		c.drop(l, false)
		return driver.ErrNotHeld
	}
	// The statement failed: its connection is closed, which ends the
	// holding in any case. Whether the release committed, or the
	// holding ended while nobody else took the key, the release is done;
	// only another holder in the row, or a holding found lost before,
	// makes it a loss.
	released, err := b.releasedConn(l)
	if err != nil {
		// Unknown: the next call asks again.
		discard(l.conn)
		return fmt.Errorf("sqllock: release: %w", err)
	}
	if released {
		c.drop(l, true)
		discard(l.conn)
		return nil
	}
	c.drop(l, false)
	return driver.ErrNotHeld
}

// releasedConn decides, on another connection, the outcome of a release
// of l whose statement failed: true if the row shows l's release, or
// still shows l while no other connection holds the native lock (then it
// ends l's connection and frees the row); false if another holder has
// the row or the native lock.
func (b *Backend) releasedConn(l *connLease) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(4*b.lossCheck, 2*time.Second))
	defer cancel()
	c := b.conns
	var owners, last []byte
	err := b.db.QueryRowContext(ctx, c.state.query, c.state.args(l.id.key)...).Scan(&owners, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	case string(last) == l.id.owner && string(owners) != listed(l.id.owner):
		return true, nil // the release committed; its reply was lost
	case string(owners) != listed(l.id.owner):
		return false, nil
	}
	// The row still names l: the native lock says whether another
	// connection took the key after l's ended.
	mine, err := b.nativeHolders(ctx, []*connLease{l})
	if err != nil {
		return false, err
	}
	if !mine[l] {
		other, err := b.nativeHeld(ctx, l.id.key)
		if err != nil || other {
			return false, err
		}
	}
	discard(l.conn)
	_, err = b.db.ExecContext(ctx, c.free.query, c.free.args(l.id.key, l.id.owner, listed(l.id.owner))...)
	return err == nil, err
}

// nativeHolders reports which of leases hold their native lock, on the
// connection that holds their mark, in one query on a pooled connection.
func (b *Backend) nativeHolders(ctx context.Context, leases []*connLease) (map[*connLease]bool, error) {
	held := make(map[*connLease]bool, len(leases))
	if b.dialect == Postgres {
		pids := make([]int64, len(leases))
		for i, l := range leases {
			pids[i] = l.server
		}
		rows, err := b.db.QueryContext(ctx, `SELECT pid, classid::BIGINT, objid::BIGINT, objsubid FROM pg_locks
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
		for _, l := range leases {
			k := uint64(AdvisoryLockKey(l.id.key))
			held[l] = have[lock{l.server, int64(k >> 32), int64(k & 0xffffffff), 1}] && have[lock{l.server, l.mark.hi, l.mark.lo, 2}]
		}
		return held, nil
	}
	cols := make([]string, 0, 2*len(leases))
	args := make([]any, 0, 2*len(leases))
	ids := make([]sql.NullInt64, 2*len(leases))
	dest := make([]any, 2*len(leases))
	for i, l := range leases {
		cols = append(cols, "IS_USED_LOCK(?)", "IS_USED_LOCK(?)")
		args = append(args, NativeLockName(l.id.key), l.mark.name())
		dest[2*i], dest[2*i+1] = &ids[2*i], &ids[2*i+1]
	}
	if err := b.db.QueryRowContext(ctx, "SELECT "+strings.Join(cols, ", "), args...).Scan(dest...); err != nil {
		return nil, err
	}
	for i, l := range leases {
		key, mark := ids[2*i], ids[2*i+1]
		held[l] = key.Valid && mark.Valid && key.Int64 == mark.Int64
	}
	return held, nil
}

// checkLoss ends the holdings whose connections lost their locks, every
// lossCheck, until stop is closed.
func (b *Backend) checkLoss(stop, done chan struct{}) {
	defer close(done)
	c := b.conns
	tick := time.NewTicker(b.lossCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		leases := make([]*connLease, 0, len(c.leases))
		for _, l := range c.leases {
			leases = append(leases, l)
		}
		c.mu.Unlock()
		if len(leases) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(4*b.lossCheck, 2*time.Second))
		held, err := b.nativeHolders(ctx, leases)
		cancel()
		if err != nil {
			continue // the server cannot say now; renewals will tell
		}
		for _, l := range leases {
			if !held[l] {
				c.drop(l, false)
			}
		}
	}
}

// nativeHeld reports whether some connection holds key's native lock.
func (b *Backend) nativeHeld(ctx context.Context, key string) (bool, error) {
	var held bool
	if b.dialect == Postgres {
		k := uint64(AdvisoryLockKey(key))
		err := b.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
AND objsubid = 1 AND granted AND classid::BIGINT = $1 AND objid::BIGINT = $2)`, int64(k>>32), int64(k&0xffffffff)).Scan(&held)
		return held, err
	}
	err := b.db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?) IS NOT NULL`, NativeLockName(key)).Scan(&held)
	return held, err
}

// endHolder ends, on the server, the connection that holds key's native
// lock, if any, and waits (up to ctx) until the lock is free.
func (b *Backend) endHolder(ctx context.Context, key string) error {
	if b.dialect == Postgres {
		k := uint64(AdvisoryLockKey(key))
		_, err := b.db.ExecContext(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND classid::BIGINT = $1 AND objid::BIGINT = $2`,
			int64(k>>32), int64(k&0xffffffff))
		return err
	}
	name := NativeLockName(key)
	var failed int64 // a connection that KILL failed to end
	for {
		var id sql.NullInt64
		if err := b.db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, name).Scan(&id); err != nil || !id.Valid {
			return err
		}
		// KILL fails on a connection that ended meanwhile: only a second
		// failure on the same one is an error.
		if _, err := b.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id.Int64, 10)); err != nil {
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

// close ends the connection-scoped holdings and their loss check. Only
// the first call stops the check: a closed backend starts none again.
func (c *connMode) close() {
	c.mu.Lock()
	c.closed = true
	leases := make([]*connLease, 0, len(c.leases))
	for _, l := range c.leases {
		leases = append(leases, l)
	}
	stop, done := c.stop, c.done
	c.stop, c.done, c.checking = nil, nil, false
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	for _, l := range leases {
		c.drop(l, false)
	}
}
