package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// Backend is a lock store in one table of an SQL database. Its methods may
// be called concurrently. It uses the *sql.DB it was given (its driver,
// its pool) and never closes it, unless it was opened from a URL. The
// methods of a nil *Backend, or of one not made by [New], return an error
// wrapping distlock.ErrInvalidBackend (Capabilities: none).
type Backend struct {
	db      *sql.DB
	dialect Dialect
	table   string
	drift   func(time.Duration) time.Duration
	schema  bool // create the table on first use
	ownsDB  bool

	listener    Listener      // nil: waiters poll, and are woken by releases in this process
	listenerSet bool          // WithListener was given
	autoListen  bool          // the listener is New's own, on pgx
	pollFirst   time.Duration // the first and longest sleeps of a watch's poll:
	pollCap     time.Duration // minPoll and maxPoll (tests change them)
	hub         hub
	local       *localHub // the process's hub of b's table, once known (without a listener)

	conns     *connMode // connection-scoped mode; nil: the lease table alone
	lossCheck time.Duration

	mu       sync.Mutex
	ready    bool          // the table was created (or is not ours to create)
	creating chan struct{} // closed when the running attempt to create it ends; nil: none runs

	acquire, release, released, refresh, holding, inspect, refused stmt
	holds                                                          holdStmts
	fair                                                           fairStmts
	kinds                                                          kindStmts
	reclaim                                                        reclaimer
}

var _ driver.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*Backend)

// WithTable sets the lease table's name (default [DefaultTable]): one or
// two dot-separated SQL identifiers of at most 57 characters each (the
// holds table adds "_holds"). New rejects anything else.
func WithTable(name string) Option { return func(b *Backend) { b.table = name } }

// WithDialect sets the dialect instead of detecting it from the driver.
func WithDialect(d Dialect) Option { return func(b *Backend) { b.dialect = d } }

// WithoutSchema stops New's backend from creating the lease table: it must
// exist already (see [Schema]), as where a migration tool owns the DDL.
func WithoutSchema() Option { return func(b *Backend) { b.schema = false } }

// WithOwnedDB makes Close close the *sql.DB too, for a db made only for
// the backend (as the URL openers do).
func WithOwnedDB() Option { return func(b *Backend) { b.ownsDB = true } }

// WithDrift sets the clock drift allowance subtracted from a lease's TTL to
// get its local validity (default driver.DefaultDrift: 1% + 2ms).
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) { b.drift = f }
}

// New returns a backend that keeps its leases in a table of db. The
// dialect is detected from db's driver (see [DetectDialect]) unless
// [WithDialect] gives it.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, errors.New("sqllock: nil *sql.DB")
	}
	b := &Backend{db: db, table: DefaultTable, drift: driver.DefaultDrift, schema: true, lossCheck: DefaultLossCheck, pollFirst: minPoll, pollCap: maxPoll}
	for _, o := range opts {
		o(b)
	}
	if b.dialect == "" {
		d, err := DetectDialect(db)
		if err != nil {
			return nil, err
		}
		b.dialect = d
	}
	if _, err := Schema(b.dialect, b.table); err != nil {
		return nil, err
	}
	if b.drift == nil {
		return nil, errors.New("sqllock: nil drift function")
	}
	if b.dialect == Postgres && !b.listenerSet && usesPgx(db) {
		b.listener, b.autoListen = pgxListener{db}, true
	}
	if b.listener != nil && b.dialect != Postgres {
		return nil, fmt.Errorf("sqllock: WithListener on %s: notifications need PostgreSQL", b.dialect)
	}
	if b.conns != nil && b.dialect == SQLite {
		return nil, errors.New("sqllock: WithConnectionScope: SQLite has no connection-scoped locks")
	}
	if b.lossCheck <= 0 {
		return nil, fmt.Errorf("sqllock: WithLossCheck(%v): want a positive interval", b.lossCheck)
	}
	b.ready = !b.schema
	b.prepareStatements()
	b.prepareHoldStatements()
	b.prepareFairStatements()
	b.prepareKindStatements()
	b.prepareReclaimStatements()
	if b.conns != nil {
		b.prepareConnStatements()
	}
	return b, nil
}

// Placeholders: $1 name, $2 owner, $3 ttl in microseconds, $4 meta, $5
// the re-entrant identity's digest (empty for none), $6 the owner between
// commas, as it appears in the owners column.
func (b *Backend) prepareStatements() {
	p := func(q string) stmt { return prepare(b.dialect, b.table, q) }
	// An attempt is granted on a free or expired row (a new lease, the
	// next token), on a row the owner holds already (a repeat: the same
	// grant, extended) and on a live row of the same re-entrant identity
	// (one more hold, the same token). A lease with several holds is never
	// shortened: another hold relies on it. A row last taken as another
	// family (kind <> 0) is left alone: whether its holds live is the
	// holds table's to say (see settleKind). Each dialect evaluates the
	// conditions against the row as it was, under the row's lock, so
	// concurrent attempts cannot both win.
	const (
		live = `(t.owners <> '' AND t.expires_us > {now})`
		mine = `INSTR(t.owners, $6) > 0`
		join = `($5 <> '' AND t.reentry = $5)`
	)
	next := `t.token + 1`
	if b.dialect == Postgres {
		next = `GREATEST(nextval('{seq}'), t.token + 1)`
	}
	upsert := strings.NewReplacer("LIVE", live, "MINE", mine, "JOIN", join, "NEXT", next).Replace(`INSERT INTO {table} AS t (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $6, {newtoken}, 1, {now} + $3, {now}, $4, $5)
	ON CONFLICT (name) DO UPDATE SET
		token = CASE WHEN LIVE THEN t.token ELSE NEXT END,
		since_us = CASE WHEN LIVE THEN t.since_us ELSE {now} END,
		meta = CASE WHEN LIVE THEN t.meta ELSE $4 END,
		reentry = CASE WHEN LIVE THEN t.reentry ELSE $5 END,
		owners = CASE WHEN NOT LIVE THEN $6 WHEN MINE THEN t.owners ELSE t.owners || $2 || ',' END,
		holds = CASE WHEN NOT LIVE THEN 1 WHEN MINE THEN t.holds ELSE t.holds + 1 END,
		expires_us = CASE WHEN LIVE AND (t.holds > 1 OR NOT MINE) THEN GREATEST(t.expires_us, {now} + $3) ELSE {now} + $3 END
	WHERE t.kind = 0 AND (NOT LIVE OR MINE OR JOIN)
	RETURNING t.token`)
	switch b.dialect {
	case Postgres:
		// One round trip: the refused case reads the holder's remaining
		// lease and the row's family in the same statement.
		b.acquire = p(`WITH up AS (` + upsert + `)
SELECT true, token, 0::BIGINT, 0 FROM up
UNION ALL
SELECT false, 0::BIGINT, expires_us - {now}, kind FROM {table} WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM up)`)
	case MySQL:
		// One round trip when granted: MySQL has no RETURNING, so the
		// token comes back as LAST_INSERT_ID(expr) in the OK packet (0:
		// refused). Assignments run left to right and see the values
		// assigned before them, so the columns that ask how the row was
		// come first; owners then says whether the attempt was granted
		// (it names the owner), and holds is counted from it. The
		// VALUES row is evaluated even when the key exists, so a refusal
		// resets LAST_INSERT_ID to 0. Without a WHERE, a refusal
		// assigns every column its old value; kind, never assigned,
		// refuses a row of another family in every column.
		b.acquire = p(strings.NewReplacer("LIVE", `(owners <> '' AND expires_us > {now})`, "MINE", `INSTR(owners, $6) > 0`, "JOIN", `($5 <> '' AND reentry = $5)`).Replace(`INSERT INTO {table} (name, owners, token, holds, expires_us, since_us, meta, reentry)
	VALUES ($1, $6, LAST_INSERT_ID({newtoken}), 1, {now} + $3, {now}, $4, $5)
	ON DUPLICATE KEY UPDATE
		token = IF(kind <> 0, token + LAST_INSERT_ID(0), IF(LIVE, IF(MINE OR JOIN, LAST_INSERT_ID(token), token + LAST_INSERT_ID(0)), LAST_INSERT_ID(token + 1))),
		since_us = IF(kind <> 0 OR LIVE, since_us, {now}),
		meta = IF(kind <> 0 OR LIVE, meta, $4),
		reentry = IF(kind <> 0 OR LIVE, reentry, $5),
		owners = IF(kind <> 0, owners, IF(LIVE, IF(MINE OR NOT JOIN, owners, CONCAT(owners, $2, ',')), $6)),
		holds = IF(kind <> 0, holds, LENGTH(owners) - LENGTH(REPLACE(owners, ',', '')) - 1),
		expires_us = IF(kind = 0 AND INSTR(owners, $6) > 0, IF(holds > 1, GREATEST(expires_us, {now} + $3), {now} + $3), expires_us)`))
	default:
		// SQLite names the old row by the table's name, without an alias.
		b.acquire = p(strings.NewReplacer(" AS t ", " ", "t.", "").Replace(upsert))
	}
	b.refused = p(`SELECT expires_us - {now}, kind FROM {table} WHERE name = $1`)
	// The last hold leaves the row, with its token, marked free since now;
	// last_owner remembers the release so that its repeat reports
	// success. MySQL assigns left to right: owners, which the others read,
	// is assigned last.
	// A row that counts waiters in line is left to fairRelease.
	release := releaseStmt + ` AND queued = 0`
	if b.dialect == Postgres {
		// The notice of the key's release goes in the same statement,
		// and out when it commits; a hold that leaves others sends none.
		release = `WITH r AS (` + release + ` RETURNING owners)
SELECT count(*), count(CASE WHEN owners = '' THEN pg_notify('{channel}', $1)::TEXT END) FROM r`
	}
	b.release = p(release)
	b.released = p(`SELECT 1 FROM {table} WHERE name = $1 AND last_owner = $2`)
	// Refresh: $1 name, $2 the owner between commas, $3 ttl.
	b.refresh = p(`UPDATE {table} SET expires_us = CASE WHEN holds > 1 THEN GREATEST(expires_us, {now} + $3) ELSE {now} + $3 END
	WHERE name = $1 AND INSTR(owners, $2) > 0 AND expires_us > {now}`)
	b.holding = p(`SELECT 1 FROM {table} WHERE name = $1 AND INSTR(owners, $2) > 0 AND expires_us > {now}`)
	b.inspect = p(`SELECT owners <> '' AND expires_us > {now}, token, holds, expires_us - {now}, since_us, meta, lim FROM {table} WHERE name = $1`)
}

// releaseStmt ends the hold of the owner $2 ($3 between commas) of the key
// $1: the last hold leaves the row, with its token, marked free since now;
// last_owner remembers the release so that its repeat reports success.
// MySQL assigns left to right: owners, which the others read, is assigned
// last.
const releaseStmt = `UPDATE {table} SET last_owner = $2,
		expires_us = CASE WHEN owners = $3 THEN {now} ELSE expires_us END,
		holds = holds - 1,
		owners = CASE WHEN owners = $3 THEN '' ELSE REPLACE(owners, $3, ',') END
	WHERE name = $1 AND INSTR(owners, $3) > 0 AND expires_us > {now}`

// Dialect returns the dialect b speaks ("" for a nil *Backend).
func (b *Backend) Dialect() Dialect {
	if b == nil {
		return ""
	}
	return b.dialect
}

// Table returns the lease table's name ("" for a nil *Backend).
func (b *Backend) Table() string {
	if b == nil {
		return ""
	}
	return b.table
}

// Capabilities implements driver.Backend: exclusive, re-entrant and fair
// locks, read-write locks and semaphores, on every dialect, and Notify
// (see the package doc for how waiters are woken). Connection-scoped
// locks ([WithConnectionScope]) are plain exclusive ones.
func (b *Backend) Capabilities() driver.Capabilities {
	if b.valid() != nil {
		return driver.Capabilities{}
	}
	table := b.conns == nil
	return driver.Capabilities{Reentrant: table, ReadWrite: table, Semaphore: table, Fair: table, Notify: true}
}

// ensure creates the table on first use. One caller at a time runs the
// DDL, with its own ctx; the others wait for it as long as their ctx
// allows, and if it fails (its ctx ended, say), the next of them tries in
// turn. A failure is returned and tried again on the next call.
func (b *Backend) ensure(ctx context.Context) error {
	for {
		b.mu.Lock()
		if b.ready {
			b.mu.Unlock()
			return nil
		}
		running := b.creating
		if running == nil {
			done := make(chan struct{})
			b.creating = done
			b.mu.Unlock()
			err := b.createTable(ctx)
			b.mu.Lock()
			b.ready, b.creating = err == nil, nil
			b.mu.Unlock()
			close(done)
			return err
		}
		b.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return fmt.Errorf("sqllock: waiting for table %s to be created: %w", b.table, ctx.Err())
		}
	}
}

// createTable runs the DDL, and brings a table made by an older version
// up to date (see [Migration]).
func (b *Backend) createTable(ctx context.Context) error {
	run := func(stmt string) error {
		var err error
		// PostgreSQL's CREATE ... IF NOT EXISTS can fail when two
		// sessions race to create the same object; the second try sees it.
		for range 3 {
			if _, err = b.db.ExecContext(ctx, stmt); err == nil || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("sqllock: creating table %s: %w", b.table, err)
		}
		return nil
	}
	if err := run(leaseSchema(b.dialect, b.table)); err != nil {
		return err
	}
	if err := run(holdsSchema(b.dialect, b.table)); err != nil {
		return err
	}
	if err := run(queueSchema(b.dialect, b.table)); err != nil {
		return err
	}
	probe := `SELECT kind, lim, queued FROM ` + b.table + ` WHERE 1 = 0`
	if _, err := b.db.ExecContext(ctx, probe); err != nil {
		// A table of an older version. A concurrent migration may add a
		// column first: the probe decides.
		for _, stmt := range addColumns(b.table) {
			_, _ = b.db.ExecContext(ctx, stmt)
		}
		if _, err := b.db.ExecContext(ctx, probe); err != nil {
			return fmt.Errorf("sqllock: adding the columns kind, lim and queued to table %s: %w", b.table, err)
		}
	}
	for _, stmt := range counterSchema(b.dialect, b.table) {
		if err := run(stmt); err != nil {
			return err
		}
	}
	return nil
}

// checkLease rejects what the table cannot store.
func checkLease(l driver.Lease) error {
	switch {
	case l.Key == "" || len(l.Key) > maxKeyBytes || !utf8.ValidString(l.Key) || strings.IndexByte(l.Key, 0) >= 0:
		return fmt.Errorf("sqllock: key %.40q: %w (want 1 to %d bytes of UTF-8 without NUL)", l.Key, driver.ErrInvalidKey, maxKeyBytes)
	case l.Owner == "" || len(l.Owner) > maxOwnerBytes || !utf8.ValidString(l.Owner) || strings.ContainsAny(l.Owner, "\x00,"):
		// The comma separates the owners of a lease's holds.
		return fmt.Errorf("sqllock: owner token of %d bytes: want 1 to %d bytes of UTF-8 without NUL or comma", len(l.Owner), maxOwnerBytes)
	case l.Kind > driver.Permit:
		return fmt.Errorf("sqllock: lock kind %d: %w", l.Kind, errors.ErrUnsupported)
	}
	return nil
}

// checkKind rejects the kinds that connection-scoped locks do not offer.
func (b *Backend) checkKind(l driver.Lease) error {
	if b.conns != nil && l.Kind != driver.Exclusive {
		return fmt.Errorf("sqllock: connection-scoped lock of kind %d: %w", l.Kind, errors.ErrUnsupported)
	}
	return nil
}

// listed is owner as the owners column lists it: between commas.
func listed(owner string) string { return "," + owner + "," }

func micros(d time.Duration) int64 { return max(d.Microseconds(), 1) }

// valid rejects a nil *Backend and one not made by New.
func (b *Backend) valid() error {
	switch {
	case b == nil:
		return fmt.Errorf("sqllock: nil *Backend: %w", distlock.ErrInvalidBackend)
	case b.db == nil:
		return fmt.Errorf("sqllock: zero Backend: use New: %w", distlock.ErrInvalidBackend)
	}
	return nil
}

func (b *Backend) start(ctx context.Context) error {
	if err := b.valid(); err != nil {
		return err
	}
	if err := b.ensure(ctx); err != nil {
		return err
	}
	// Known once; until then each call asks, and a failure here only
	// leaves this process's waiters to their poll.
	_, _ = b.localHub(ctx)
	b.sweepSoon()
	return nil
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.valid(); err != nil {
		return driver.Grant{}, err
	}
	if err := checkLease(req.Lease); err != nil {
		return driver.Grant{}, err
	}
	if req.TTL <= 0 {
		return driver.Grant{}, fmt.Errorf("sqllock: TTL %v is not positive", req.TTL)
	}
	if req.Fair && (b.conns != nil || req.Kind != driver.Exclusive) {
		return driver.Grant{}, fmt.Errorf("sqllock: fair locks are plain mutexes of the lease table: %w", errors.ErrUnsupported)
	}
	if err := b.checkKind(req.Lease); err != nil {
		return driver.Grant{}, err
	}
	if req.Kind == driver.Permit && req.Limit < 1 {
		return driver.Grant{}, fmt.Errorf("sqllock: semaphore limit %d: want at least 1", req.Limit)
	}
	if req.Kind != driver.Exclusive && req.Reentry != "" {
		return driver.Grant{}, fmt.Errorf("sqllock: re-entrant lock of kind %d: %w", req.Kind, errors.ErrUnsupported)
	}
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	meta := ""
	if len(req.Meta) > 0 {
		m, err := json.Marshal(req.Meta)
		if err != nil {
			return driver.Grant{}, fmt.Errorf("sqllock: metadata: %w", err)
		}
		meta = string(m)
	}
	if b.conns != nil {
		return b.acquireConn(ctx, req, meta)
	}
	if req.Kind != driver.Exclusive {
		return b.acquireShared(ctx, req, meta)
	}
	reentry := ""
	if req.Reentry != "" {
		// The table keeps a digest, not the identity, which is a secret.
		sum := sha256.Sum256([]byte(req.Reentry))
		reentry = hex.EncodeToString(sum[:])
	}
	args := b.acquire.args(req.Key, req.Owner, micros(req.TTL), meta, reentry, listed(req.Owner))
	// A row last taken as another family refuses the statement; once
	// settleKind has made it a mutex's again (its holds have all ended),
	// the statement is made once more.
	for settled := false; ; settled = true {
		var (
			g      driver.Grant
			family int64
			err    error
		)
		if req.Fair {
			g, family, err = b.acquireFair(ctx, req, meta, reentry)
		} else {
			g, family, err = b.acquireOnce(ctx, req, args)
		}
		if err != nil || g.Acquired || family == 0 || settled {
			return g, err
		}
		if err := b.settleKind(ctx, req); err != nil {
			return driver.Grant{}, err
		}
	}
}

// acquireOnce runs the mutex statement once, and on a refusal reads the
// holder's remaining lease and the row's family (kind).
func (b *Backend) acquireOnce(ctx context.Context, req driver.Request, args []any) (driver.Grant, int64, error) {
	type answer struct {
		granted bool
		token   int64
		left    sql.NullInt64 // the holder's remaining lease, when refused
		kind    sql.NullInt64 // the row's family, when refused
	}
	a, err := retryConflict(ctx, func() (a answer, err error) {
		switch b.dialect {
		case Postgres:
			err = b.db.QueryRowContext(ctx, b.acquire.query, args...).Scan(&a.granted, &a.token, &a.left, &a.kind)
			if errors.Is(err, sql.ErrNoRows) { // the row appeared during the statement: held
				return answer{}, nil
			}
		case MySQL:
			var res sql.Result
			if res, err = b.db.ExecContext(ctx, b.acquire.query, args...); err == nil {
				a.token, err = res.LastInsertId()
				a.granted = a.token > 0
			}
		default:
			err = b.db.QueryRowContext(ctx, b.acquire.query, args...).Scan(&a.token)
			a.granted = err == nil
			if errors.Is(err, sql.ErrNoRows) {
				err = nil
			}
		}
		return a, err
	})
	if err != nil {
		return driver.Grant{}, 0, fmt.Errorf("sqllock: acquire: %w", err)
	}
	if a.granted {
		return driver.Grant{Acquired: true, Token: uint64(a.token), ValidFor: req.TTL - b.drift(req.TTL)}, 0, nil
	}
	left, kind := a.left, a.kind
	if b.dialect != Postgres {
		// A second round trip, on the refused path only.
		err := b.db.QueryRowContext(ctx, b.refused.query, b.refused.args(req.Key)...).Scan(&left, &kind)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return driver.Grant{}, 0, nil // refused; the wait is only unknown
		}
	}
	g := driver.Grant{}
	if left.Valid {
		g.RetryAfter = max(time.Duration(left.Int64)*time.Microsecond, time.Millisecond)
	}
	return g, kind.Int64, nil
}

// Release implements driver.Backend. A release made here wakes at once
// the waiters of the key in this process (see [Backend.Watch]).
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	handed, err := b.releaseOne(ctx, l)
	switch {
	case handed != "":
		b.wakeLocal(l.Key, handed) // its turn: the others sleep on
	case err == nil:
		b.wakeLocal(l.Key, "")
	}
	return err
}

// releaseOne ends l's hold, and returns the waiter it handed the lease to,
// if any.
func (b *Backend) releaseOne(ctx context.Context, l driver.Lease) (string, error) {
	if err := checkLease(l); err != nil {
		return "", err
	}
	if err := b.start(ctx); err != nil {
		return "", err
	}
	if err := b.checkKind(l); err != nil {
		return "", err
	}
	switch {
	case b.conns != nil:
		return "", b.releaseConn(ctx, l)
	case l.Kind != driver.Exclusive:
		return "", b.releaseShared(ctx, l)
	}
	n, err := b.exec(ctx, b.release, l.Key, l.Owner, listed(l.Owner))
	if err != nil {
		return "", fmt.Errorf("sqllock: release: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	// Not released: the row counts waiters in line, or the owner holds
	// nothing (it may be giving up its place in line).
	r, err := b.fairRelease(ctx, l)
	switch {
	case err != nil:
		return "", fmt.Errorf("sqllock: release: %w", err)
	case r.hold:
		return r.handed, nil
	case r.place:
		return r.handed, driver.ErrNotHeld
	}
	return "", b.repeated(ctx, l)
}

// repeated reports whether a release of l that changed nothing repeats
// one that did: nil if so, driver.ErrNotHeld if not.
func (b *Backend) repeated(ctx context.Context, l driver.Lease) error {
	var one int
	err := b.db.QueryRowContext(ctx, b.released.query, b.released.args(l.Key, l.Owner)...).Scan(&one)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return driver.ErrNotHeld
	}
	return fmt.Errorf("sqllock: release: %w", err)
}

// exec runs s and returns the number of rows it changed: from the result,
// or from the count s selects on PostgreSQL.
func (b *Backend) exec(ctx context.Context, s stmt, args ...any) (int64, error) {
	if b.dialect == Postgres {
		var n, notified int64
		err := b.db.QueryRowContext(ctx, s.query, s.args(args...)...).Scan(&n, &notified)
		return n, err
	}
	res, err := b.db.ExecContext(ctx, s.query, s.args(args...)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Refresh implements driver.Backend.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := checkLease(l); err != nil {
		return 0, err
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("sqllock: TTL %v is not positive", ttl)
	}
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	if err := b.checkKind(l); err != nil {
		return 0, err
	}
	if l.Kind != driver.Exclusive {
		return b.refreshShared(ctx, l, ttl)
	}
	if b.conns != nil {
		cl := b.conns.lease(l)
		if cl == nil {
			return 0, driver.ErrNotHeld
		}
		return b.refreshConn(ctx, cl, ttl)
	}
	return b.extend(ctx, ttl, b.refresh, b.holding, l.Key, listed(l.Owner))
}

// extend runs the refresh statement st with args (name, owner) and ttl,
// and reports the lease's validity, or driver.ErrNotHeld if st matched no
// row. holding, with the same args, says whether the owner holds the key.
func (b *Backend) extend(ctx context.Context, ttl time.Duration, st, holding stmt, key, owner string) (time.Duration, error) {
	res, err := b.db.ExecContext(ctx, st.query, st.args(key, owner, micros(ttl))...)
	if err != nil {
		return 0, fmt.Errorf("sqllock: refresh: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqllock: refresh: %w", err)
	}
	if n == 0 && b.dialect == MySQL {
		// MySQL counts changed rows, not matched ones: a hold whose
		// refresh left a longer lease as it was changed nothing.
		var one int
		err := b.db.QueryRowContext(ctx, holding.query, holding.args(key, owner)...).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("sqllock: refresh: %w", err)
		}
		n = int64(one)
	}
	if n == 0 {
		return 0, driver.ErrNotHeld
	}
	return ttl - b.drift(ttl), nil
}

// Inspect implements driver.Backend.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	var (
		held               bool
		token, left, since int64
		holds, lim         int
		meta               string
	)
	err := b.db.QueryRowContext(ctx, b.inspect.query, b.inspect.args(key)...).Scan(&held, &token, &holds, &left, &since, &meta, &lim)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Info{}, nil
	}
	if err != nil {
		return driver.Info{}, fmt.Errorf("sqllock: inspect: %w", err)
	}
	if b.conns != nil && held {
		// The row says held; the native lock says whether its connection
		// lives.
		if held, err = b.nativeHeld(ctx, key); err != nil {
			return driver.Info{}, fmt.Errorf("sqllock: inspect: %w", err)
		}
	}
	info := driver.Info{Token: uint64(token)}
	if !held && b.conns == nil {
		// A read-write lock or a semaphore keeps its holds apart.
		if meta, err = b.inspectShared(ctx, key, &info); err != nil {
			return driver.Info{}, err
		}
		if info.Kind == driver.Permit {
			info.Limit = lim
		}
		since = -1
	} else if held {
		info.Held, info.Kind, info.Holds = true, driver.Exclusive, max(holds, 1)
		info.TTL = time.Duration(left) * time.Microsecond
	}
	if !info.Held {
		return info, nil
	}
	info.Meta = make(map[string]string)
	if meta != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(meta), &m); err != nil {
			info.Warnings = append(info.Warnings, "the holder's metadata is not a JSON object of strings")
		}
		maps.Copy(info.Meta, m)
	}
	if since >= 0 {
		info.Meta["since"] = strconv.FormatInt(since/1000, 10)
	}
	return info, nil
}

// Close implements driver.Backend. It closes the *sql.DB only with
// [WithOwnedDB]; otherwise db stays open, as do the locks held in it.
// Calling it again does nothing and returns nil.
func (b *Backend) Close() error {
	if err := b.valid(); err != nil {
		return err
	}
	b.closeListener()
	b.reclaim.close()
	if b.conns != nil {
		b.conns.close()
	}
	if b.ownsDB {
		return b.db.Close()
	}
	return nil
}
