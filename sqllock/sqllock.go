package sqllock

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/distlock-go/distlock/driver"
)

// Backend is a lock store in one table of an SQL database. Its methods may
// be called concurrently. It uses the *sql.DB it was given (its driver,
// its pool) and never closes it, unless it was opened from a URL. The
// methods of a nil *Backend, or of one not made by [New], return an error
// wrapping driver.ErrInvalidBackend (Capabilities: none).
type Backend struct {
	db      *sql.DB
	dialect Dialect
	d       *dialect // the dialect's statements and behaviours
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
	gates       gates     // MySQL: the wake locks of waiters and holders (gate.go)
	turn        string    // MySQL: turnFor (tests change it)

	opts      driver.OptionCheck // the first invalid option, which New returns
	eng       engine             // the mode: the lease table, or connection-scoped locks
	conns     *connMode          // connection-scoped mode; nil: the lease table alone
	lossCheck time.Duration

	mu       sync.Mutex
	ready    bool          // the table was created (or is not ours to create)
	creating chan struct{} // closed when the running attempt to create it ends; nil: none runs

	acquire, release, released, refresh, holding, inspect, refused, markStmt, passOn stmt
	holds                                                                            holdStmts
	fair                                                                             fairStmts
	kinds                                                                            kindStmts
	reclaim                                                                          reclaimer
	prepared                                                                         prepared
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
// get its local validity (default driver.DefaultDrift: 1% + 2ms). New
// refuses a nil f.
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) {
		if f == nil {
			b.opts.Invalid("sqllock", "WithDrift(nil)", "want a function")
			return
		}
		b.drift = f
	}
}

// New returns a backend that keeps its leases in a table of db. The
// dialect is detected from db's driver (see [DetectDialect]) unless
// [WithDialect] gives it. An option that cannot work (of several, the
// first) makes New fail with an error wrapping driver.ErrInvalidBackend.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, errors.New("sqllock: nil *sql.DB")
	}
	b := &Backend{db: db, table: DefaultTable, drift: driver.DefaultDrift, schema: true, lossCheck: DefaultLossCheck, pollFirst: minPoll, pollCap: maxPoll, turn: turnFor}
	for _, o := range opts {
		o(b)
	}
	if err := b.opts.Err(); err != nil {
		return nil, err
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
	b.d = dialects[b.dialect]
	if b.d.listens && !b.listenerSet && usesPgx(db) {
		b.listener, b.autoListen = pgxListener{db}, true
	}
	if b.listener != nil && !b.d.listens {
		b.opts.Invalid("sqllock", "WithListener", fmt.Sprintf("notifications need PostgreSQL, not %s", b.dialect))
	}
	if b.conns != nil && b.d.native == nil {
		b.opts.Invalid("sqllock", "WithConnectionScope", fmt.Sprintf("%s has no connection-scoped locks", b.dialect))
	}
	if err := b.opts.Err(); err != nil {
		return nil, err
	}
	b.ready = !b.schema
	b.eng = tableEngine{b}
	if b.conns != nil {
		b.eng = connEngine{b}
	}
	b.prepareGates()
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
	return b.eng.caps()
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
	if err := run(b.d.lease(b.table)); err != nil {
		return err
	}
	if err := run(holdsSchema(b.d, b.table)); err != nil {
		return err
	}
	if err := run(queueSchema(b.d, b.table)); err != nil {
		return err
	}
	probe := probeColumns(b.d, b.table)
	if _, err := b.db.ExecContext(ctx, probe); err != nil {
		// A table of an older version. A concurrent migration may add a
		// column first: the probe decides.
		for _, stmt := range addColumns(b.d, b.table) {
			_, _ = b.db.ExecContext(ctx, stmt)
		}
		if _, err := b.db.ExecContext(ctx, probe); err != nil {
			return fmt.Errorf("sqllock: adding the columns that table %s lacks (%s): %w", b.table, probe, err)
		}
	}
	for _, stmt := range b.d.counter(b.table) {
		if err := run(stmt); err != nil {
			return err
		}
	}
	return nil
}

// checkLease is l.Validate (the contract's limits: the key's and the
// owner's lengths, the kind) followed by checkStorable.
func checkLease(l driver.Lease) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	return checkStorable(l)
}

// checkStorable rejects what the table cannot store within the contract's
// limits: a key or owner that is not UTF-8 or holds a NUL, and an owner
// with a comma, which separates the owners of a lease's holds.
func checkStorable(l driver.Lease) error {
	switch {
	case !utf8.ValidString(l.Key) || strings.IndexByte(l.Key, 0) >= 0:
		return fmt.Errorf("sqllock: key %.40q: %w (want UTF-8 without NUL)", l.Key, driver.ErrInvalidKey)
	case !utf8.ValidString(l.Owner) || strings.ContainsAny(l.Owner, "\x00,"):
		return fmt.Errorf("sqllock: key %.40q: owner token %.40q: %w (want UTF-8 without NUL or comma)", l.Key, l.Owner, driver.ErrInvalidRequest)
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
		return fmt.Errorf("sqllock: nil *Backend: %w", driver.ErrInvalidBackend)
	case b.db == nil:
		return fmt.Errorf("sqllock: zero Backend: use New: %w", driver.ErrInvalidBackend)
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
	if err := req.Validate(b.Capabilities()); err != nil {
		return driver.Grant{}, fmt.Errorf("sqllock: %w", err)
	}
	if err := checkStorable(req.Lease); err != nil {
		return driver.Grant{}, err
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
	return b.eng.acquire(ctx, req, meta)
}

// Release implements driver.Backend. A release made here wakes at once
// the waiters of the key in this process (see [Backend.Watch]).
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	handed, err := b.releaseOne(ctx, l)
	gated := false
	if (err == nil || errors.Is(err, driver.ErrNotHeld)) && b.gates.on { // b is valid then
		// The key's wake lock wakes one waiter: this process's, or
		// through the server another's (see gate.go).
		gated = b.passWake(l.ID())
	}
	switch {
	case handed != "":
		b.wakeLocal(l.Key, wakeOwner, handed) // its turn: the others sleep on
	case gated:
	case err == nil && l.Kind == driver.Exclusive:
		b.wakeLocal(l.Key, wakeOldest, "")
	case err == nil:
		b.wakeLocal(l.Key, wakeAll, "")
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
	if err := b.eng.accepts(l); err != nil {
		return "", err
	}
	return b.eng.release(ctx, l)
}

// exec runs s and returns the number of rows it changed.
func (b *Backend) exec(ctx context.Context, s stmt, args ...any) (int64, error) {
	res, err := b.execHot(ctx, s, s.args(args...)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Refresh implements driver.Backend.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("sqllock: %w", err)
	}
	if err := checkStorable(l); err != nil {
		return 0, err
	}
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	if err := b.eng.accepts(l); err != nil {
		return 0, err
	}
	return b.eng.refresh(ctx, l, ttl)
}

// extend runs the refresh statement st with args (name, owner) and ttl,
// and reports the lease's validity, or driver.ErrNotHeld if st matched no
// row. holding, with the same args, says whether the owner holds the key.
func (b *Backend) extend(ctx context.Context, ttl time.Duration, st, holding stmt, key, owner string) (time.Duration, error) {
	res, err := b.execHot(ctx, st, st.args(key, owner, micros(ttl))...)
	if err != nil {
		return 0, fmt.Errorf("sqllock: refresh: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqllock: refresh: %w", err)
	}
	if n == 0 && b.d.countsChanged {
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

// Close implements driver.Backend. It closes the *sql.DB only with
// [WithOwnedDB]; otherwise db stays open, as do the locks held in it.
// Calling it again does nothing and returns nil.
func (b *Backend) Close() error {
	if err := b.valid(); err != nil {
		return err
	}
	b.closeListener()
	b.gates.close()
	b.reclaim.close()
	b.prepared.close()
	if b.conns != nil {
		b.conns.close()
	}
	if b.ownsDB {
		return b.db.Close()
	}
	return nil
}
