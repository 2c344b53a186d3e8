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
func WithLossCheck(every time.Duration) Option {
	return func(b *Backend) {
		if every <= 0 {
			b.opts.Invalid("sqllock", fmt.Sprintf("WithLossCheck(%v)", every), "want a positive interval")
			return
		}
		b.lossCheck = every
	}
}

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
	leases   map[driver.LeaseID]*connLease
	released map[driver.LeaseID]time.Time // recent releases, so that a repeat reports success
	checking bool                         // the loss check runs
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	serverOK bool // the server's version was checked
	native   nativeLocks

	acquire, grab, take, refresh, release, unset, free, state stmt
}

// connLease is one connection-scoped holding.
type connLease struct {
	id     driver.LeaseID
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

// connEngine is the engine of connection-scoped locks: plain mutexes.
type connEngine struct{ b *Backend }

func (connEngine) caps() driver.Capabilities { return driver.Capabilities{Notify: true} }

func (connEngine) accepts(l driver.Lease) error {
	if l.Kind != driver.Exclusive {
		return fmt.Errorf("sqllock: connection-scoped %s: %w", l.Kind, errors.ErrUnsupported)
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

// nativeLocks are a database's own connection-scoped locks: what differs
// between PostgreSQL's advisory locks (conn_postgres.go) and MySQL's
// named locks (conn_mysql.go). The rest of the mode is this file's.
type nativeLocks interface {
	// prepare prepares the statements of c that differ.
	prepare(c *connMode)
	// checkServer refuses a server that cannot end an idle holder.
	checkServer(ctx context.Context) error
	// try takes, on conn, the key's native lock and l's mark, and where it
	// can the key's row in the same statement.
	try(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, meta string) (nativeAttempt, error)
	// take issues the token once try got the native lock without the
	// row, and sets the idle limit: 0 for a row of another family. It
	// updates a.marked where it takes the mark.
	take(ctx context.Context, conn *sql.Conn, l *connLease, req driver.Request, meta string, a *nativeAttempt) (int64, error)
	// refresh renews l's row and idle limit on its connection.
	refresh(ctx context.Context, l *connLease, ttl time.Duration) error
	// release frees l's row and native locks on its connection, and says
	// whether the connection still held the key's lock.
	release(ctx context.Context, l *connLease) (unlocked bool, err error)
	// holders reports which of leases hold their native lock, on the
	// connection that holds their mark, in one query on a pooled
	// connection.
	holders(ctx context.Context, leases []*connLease) (map[*connLease]bool, error)
	// held reports whether some connection holds key's native lock.
	held(ctx context.Context, key string) (bool, error)
	// endHolder ends, on the server, the connection that holds key's
	// native lock, if any, and waits (up to ctx) until the lock is free.
	endHolder(ctx context.Context, key string) error
}

// nativeAttempt is the answer of nativeLocks.try.
type nativeAttempt struct {
	got        bool          // the key's native lock
	marked     bool          // the holding's mark
	server     int64         // the connection's id on the server
	left, kind sql.NullInt64 // the row's remaining lease and family, as they were
	taken      sql.NullInt64 // the token, if the attempt took the row too
}

// connRow selects, for the key $1, the row's remaining lease and family.
const connRow = `(SELECT expires_us - {now} FROM {table} WHERE name = $1), (SELECT kind FROM {table} WHERE name = $1)`

// connFree frees the row of the key $1 held by the owner $2 ($3 between
// commas).
const connFree = `UPDATE {table} SET owners = '', holds = 0, expires_us = {now}, last_owner = $2 WHERE name = $1 AND owners = $3`

func (b *Backend) prepareConnStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
	c := b.conns
	c.native = b.d.native(b)
	c.native.prepare(c)
	c.free = p(connFree)
	c.state = p(`SELECT owners, last_owner FROM {table} WHERE name = $1`)
}

func (b *Backend) acquireConn(ctx context.Context, req driver.Request, meta string) (driver.Grant, error) {
	if req.Reentry != "" {
		return driver.Grant{}, fmt.Errorf("sqllock: re-entrant connection-scoped locks: %w", errors.ErrUnsupported)
	}
	if err := b.conns.native.checkServer(ctx); err != nil {
		return driver.Grant{}, err
	}
	c := b.conns
	id := req.ID()
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
	l = &connLease{id: id, conn: conn, mark: newMark(), lost: make(chan struct{})}
	a, err := c.native.try(ctx, conn, l, req, meta)
	if err != nil {
		discard(conn) // frees the native lock if the reply was lost
		return driver.Grant{}, fmt.Errorf("sqllock: acquire: %w", err)
	}
	if !a.got {
		conn.Close()
		g := driver.Grant{}
		if a.left.Valid {
			g.RetryAfter = max(time.Duration(a.left.Int64)*time.Microsecond, time.Millisecond)
		}
		return g, nil
	}
	l.server = a.server
	if a.kind.Int64 != 0 && !a.taken.Valid {
		// The row was last taken as another family: the holds table says
		// whether that family still holds the key.
		if err := b.settleKind(ctx, req); err != nil {
			discard(conn)
			return driver.Grant{}, err
		}
	}
	token := a.taken.Int64
	if !a.taken.Valid {
		token, err = c.native.take(ctx, conn, l, req, meta, &a)
		if err == nil && token == 0 { // a row of another family, taken meanwhile
			discard(conn)
			return driver.Grant{RetryAfter: time.Millisecond}, nil
		}
	}
	if err == nil && !a.marked {
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
		c.leases = make(map[driver.LeaseID]*connLease)
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
				c.released = make(map[driver.LeaseID]time.Time)
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
	return c.leases[l.ID()]
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
	err := c.native.refresh(ctx, l, ttl)
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
		_, repeat := c.released[lease.ID()]
		c.mu.Unlock()
		if repeat {
			return nil
		}
		return driver.ErrNotHeld
	}
	unlocked, err := c.native.release(ctx, l)
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
	err := b.db.QueryRowContext(ctx, c.state.query, c.state.args(l.id.Key)...).Scan(&owners, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	case string(last) == l.id.Owner && string(owners) != listed(l.id.Owner):
		return true, nil // the release committed; its reply was lost
	case string(owners) != listed(l.id.Owner):
		return false, nil
	}
	// The row still names l: the native lock says whether another
	// connection took the key after l's ended.
	mine, err := b.nativeHolders(ctx, []*connLease{l})
	if err != nil {
		return false, err
	}
	if !mine[l] {
		other, err := b.nativeHeld(ctx, l.id.Key)
		if err != nil || other {
			return false, err
		}
	}
	discard(l.conn)
	_, err = b.db.ExecContext(ctx, c.free.query, c.free.args(l.id.Key, l.id.Owner, listed(l.id.Owner))...)
	return err == nil, err
}

// nativeHolders reports which of leases hold their native lock, on the
// connection that holds their mark, in one query on a pooled connection.
func (b *Backend) nativeHolders(ctx context.Context, leases []*connLease) (map[*connLease]bool, error) {
	return b.conns.native.holders(ctx, leases)
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
	return b.conns.native.held(ctx, key)
}

// endHolder ends, on the server, the connection that holds key's native
// lock, if any, and waits (up to ctx) until the lock is free.
func (b *Backend) endHolder(ctx context.Context, key string) error {
	return b.conns.native.endHolder(ctx, key)
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

// discard closes conn for good: database/sql drops a connection whose
// Raw callback reports driver.ErrBadConn. The server then ends the
// session and frees its locks.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = conn.Close()
}
