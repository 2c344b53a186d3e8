package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Fair (first-come, first-served) mutexes keep their waiters in a third
// table, the lease table's name followed by "_queue" (see [Schema]): one
// row per waiter in line, with its place (seq, counted per key) and the
// end of its place (expires_us), which each of its attempts renews for
// Request.Queue. A waiter that vanished is skipped once its place ends.
//
// A fair attempt is one transaction on the key's row: it takes the lease
// if the key is free and nobody live queued before it, or if a release
// handed it the lease already; otherwise it keeps its place. The lease
// row counts the waiters in line (queued), so that a release of a key
// with none stays one statement: a release that finds waiters frees the
// lease and grants it to the oldest live waiter in one transaction (a
// direct grant; on PostgreSQL the usual case is one statement, see
// dialect.handOver), for as long as that waiter's place lasts, and wakes
// that waiter only; the waiter's next attempt finds the lease its own and
// extends it to its TTL.

// queueTable names the queue table of a lease table.
func queueTable(table string) string { return table + "_queue" }

// queueSchema is the DDL of the queue table:
//
//	name        the key
//	owner       the waiter's owner token
//	seq         its place: the key's earlier waiters have smaller ones
//	expires_us  the end of its place by the database clock
func queueSchema(d *dialect, table string) string {
	key, owner, tail := d.types.key, d.types.owner, d.types.tail
	return `CREATE TABLE IF NOT EXISTS ` + queueTable(table) + ` (
	name       ` + key + ` NOT NULL,
	owner      ` + owner + ` NOT NULL,
	seq        BIGINT NOT NULL,
	expires_us BIGINT NOT NULL,
	PRIMARY KEY (name, owner)
)` + tail
}

// fairStmts are the statements of fair mutexes. Placeholders: $1 name,
// then as each says.
type fairStmts struct {
	mine, lock, state, clean, head, enqueue, dequeue, count, grant, extend, join, release, handed, handOver, watch stmt
}

func (b *Backend) prepareFairStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
	f := &b.fair
	const state = `owners, expires_us - {now}, kind, token, reentry`
	lock, read := b.d.lockRow(state)
	f.lock, f.state = p(lock), p(read)
	f.grant = p(`UPDATE {table} SET token = {next}, ` + grantCols + ` WHERE name = $1{returning}`)
	// $2: the waiter handed the lease, between commas, or ''.
	f.handed = p(b.d.turn)
	f.clean = p(`DELETE FROM {queue} WHERE name = $1 AND expires_us <= {now}`)
	f.head = p(`SELECT owner, expires_us - {now} FROM {queue} WHERE name = $1 ORDER BY seq, owner LIMIT 1`)
	if b.d.head != "" {
		f.clean, f.head = stmt{}, p(b.d.head)
	}
	enqueue := `INSERT INTO {queue} (name, owner, seq, expires_us) SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, {now} + $3 FROM {queue} WHERE name = $1`
	// $2 owner, $3 its place's length (µs).
	f.enqueue = p(enqueue + ` ON CONFLICT (name, owner) DO UPDATE SET expires_us = excluded.expires_us`)
	f.dequeue = p(`DELETE FROM {queue} WHERE name = $1 AND owner = $2`)
	f.count = p(`UPDATE {table} SET queued = (SELECT COUNT(*) FROM {queue} WHERE name = $1) WHERE name = $1`)
	// A repeat, or the first attempt after a hand-over: $2 ttl (µs), $3
	// meta, $4 the re-entrant identity's digest. A lease with several
	// holds is only ever lengthened.
	f.extend = p(`UPDATE {table} SET expires_us = CASE WHEN holds > 1 THEN GREATEST(expires_us, {now} + $2) ELSE {now} + $2 END,
	meta = CASE WHEN holds > 1 THEN meta ELSE $3 END, reentry = CASE WHEN holds > 1 THEN reentry ELSE $4 END WHERE name = $1`)
	// The attempt of a waiter that a release handed the lease to, or a
	// repeat, in one statement: $2 the owner between commas, $3 ttl, $4
	// meta, $5 the re-entrant identity's digest.
	mine := `expires_us = CASE WHEN holds > 1 THEN GREATEST(expires_us, {now} + $3) ELSE {now} + $3 END,
	meta = CASE WHEN holds > 1 THEN meta ELSE $4 END, reentry = CASE WHEN holds > 1 THEN reentry ELSE $5 END
	WHERE name = $1 AND kind = 0 AND INSTR(owners, $2) > 0 AND expires_us > {now}`
	f.mine = p(`UPDATE {table} SET {keep}` + mine + `{returning}`)
	// One more hold of the identity that holds the lease: $2 owner, $3 ttl.
	f.join = p(`UPDATE {table} SET owners = ` + b.d.concat("owners", "$2", "','") + `, holds = holds + 1, expires_us = GREATEST(expires_us, {now} + $3) WHERE name = $1`)
	f.release = p(releaseStmt)
	if b.d.handOver != "" {
		f.handOver = p(b.d.handOver)
	}
	// A watch's poll: is the key free, or this owner's, and who is first
	// in line.
	f.watch = p(`SELECT ` + state + `, COALESCE((SELECT owner FROM {queue} q WHERE q.name = $1 AND q.expires_us > {now} ORDER BY seq, owner LIMIT 1), '') FROM {table} WHERE name = $1`)
}

// grantCols make the row a new lease of the owner $2 (between commas)
// for $3 µs, with the metadata $4 and the re-entrant identity's digest $5.
const grantCols = `owners = $2, holds = 1, expires_us = {now} + $3, since_us = {now}, meta = $4, reentry = $5, kind = 0, lim = 0`

// row is the state of a key's lease row.
type row struct {
	owners  string
	left    int64 // µs until the lease's end
	kind    int
	token   int64
	reentry string
}

// scan lists the destinations of the columns of a row's state.
func (r *row) scan(more ...any) []any {
	return append([]any{&r.owners, &r.left, &r.kind, &r.token, &r.reentry}, more...)
}

func (r row) free() bool { return r.owners == "" || r.left <= 0 }

// lock locks the key's row, creating it if need be, and reads it.
func (f txn) lock(key string) (r row, err error) {
	s := &f.b.fair
	err = f.lockRow(s.lock, s.state, key, r.scan()...)
	return r, err
}

// head returns the oldest live waiter in the key's line and how long its
// place lasts, or "" if nobody waits, after taking out the places that
// ended.
func (f txn) head(key string) (string, int64, error) {
	s := &f.b.fair
	if s.clean.query != "" {
		if _, err := f.exec(s.clean, key); err != nil {
			return "", 0, err
		}
	}
	var (
		owner string
		left  int64
	)
	err := f.row(s.head, []any{key}, &owner, &left)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil
	}
	return owner, left, err
}

// grant makes the key's row a new lease of owner for ttl µs, takes owner
// out of the line, and returns the lease's token.
func (f txn) grant(key, owner string, ttl int64, meta, reentry string) (int64, error) {
	s := &f.b.fair
	token, err := f.token(s.grant, key, listed(owner), ttl, meta, reentry)
	if err != nil {
		return 0, err
	}
	return token, f.leave(key, owner)
}

// leave takes owner out of the key's line and counts the line again.
func (f txn) leave(key, owner string) error {
	s := &f.b.fair
	if _, err := f.exec(s.dequeue, key, owner); err != nil {
		return err
	}
	_, err := f.exec(s.count, key)
	return err
}

// fairAttempt is the outcome of a fair attempt: a grant, or the family
// of a row last taken as another (see settleKind).
type fairAttempt struct {
	g      driver.Grant
	family int
}

// acquireFair makes one fair attempt at a mutex.
// reentry is the digest of req.Reentry, or "".
func (b *Backend) acquireFair(ctx context.Context, req driver.Request, meta, reentry string) (driver.Grant, int64, error) {
	if token, err := b.fairMine(ctx, req, meta, reentry); err != nil || token > 0 {
		if err != nil {
			return driver.Grant{}, 0, fmt.Errorf("sqllock: acquire: %w", err)
		}
		return b.granted(req, token), 0, nil
	}
	a, err := begin(ctx, b, func(f txn) (fairAttempt, error) { return f.attempt(req, meta, reentry) })
	if err != nil {
		return driver.Grant{}, 0, fmt.Errorf("sqllock: acquire: %w", err)
	}
	return a.g, int64(a.family), nil
}

// fairMine extends the lease of req's owner in one statement, if it holds
// the key (a release handed it over, or a repeat), and returns its token;
// 0 if it does not hold it.
func (b *Backend) fairMine(ctx context.Context, req driver.Request, meta, reentry string) (int64, error) {
	s := &b.fair.mine
	args := s.args(req.Key, listed(req.Owner), micros(req.TTL), meta, reentry)
	return retryConflict(ctx, func() (int64, error) {
		if b.d.byInsertID {
			res, err := b.execHot(ctx, *s, args...)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		}
		var token int64
		err := b.scanHot(ctx, *s, args, &token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return token, err
	})
}

func (f txn) attempt(req driver.Request, meta, reentry string) (fairAttempt, error) {
	b := f.b
	r, err := f.lock(req.Key)
	if err != nil {
		return fairAttempt{}, err
	}
	if r.kind != 0 {
		return fairAttempt{family: r.kind}, nil
	}
	ttl := micros(req.TTL)
	granted := driver.Grant{Acquired: true, ValidFor: req.TTL - b.drift(req.TTL)}
	if !r.free() && strings.Contains(r.owners, listed(req.Owner)) {
		// A repeat, or the lease a release handed over: extended.
		if _, err := f.exec(b.fair.extend, req.Key, ttl, meta, reentry); err != nil {
			return fairAttempt{}, err
		}
		granted.Token = uint64(r.token)
		return fairAttempt{g: granted}, f.leave(req.Key, req.Owner)
	}
	if !r.free() && reentry != "" && r.reentry == reentry {
		// One more hold of the identity that holds the lease: it is in
		// already, ahead of the line.
		if _, err := f.exec(b.fair.join, req.Key, req.Owner, ttl); err != nil {
			return fairAttempt{}, err
		}
		granted.Token = uint64(r.token)
		return fairAttempt{g: granted}, f.leave(req.Key, req.Owner)
	}
	head, place, err := f.head(req.Key)
	if err != nil {
		return fairAttempt{}, err
	}
	if r.free() && (head == "" || head == req.Owner) {
		token, err := f.grant(req.Key, req.Owner, ttl, meta, reentry)
		granted.Token = uint64(token)
		return fairAttempt{g: granted}, err
	}
	wait := place // the key is free: the first in line's turn
	if !r.free() {
		wait = r.left
	}
	if req.Queue > 0 {
		if _, err := f.exec(b.fair.enqueue, req.Key, req.Owner, micros(req.Queue)); err != nil {
			return fairAttempt{}, err
		}
		if _, err := f.exec(b.fair.count, req.Key); err != nil {
			return fairAttempt{}, err
		}
	}
	return fairAttempt{g: driver.Grant{RetryAfter: max(time.Duration(wait)*time.Microsecond, time.Millisecond)}}, nil
}

// fairRelease is the release of a mutex whose row counts waiters in line,
// and of an owner that holds nothing (which may be a waiter giving up its
// place): in one transaction, it ends the owner's hold, takes the owner
// out of the line, and if that leaves the key free with waiters in line,
// grants the lease to the oldest live one. It reports whether a hold
// ended, whether a place did, and who was handed the lease.
type released struct {
	hold, place bool
	handed      string
}

func (b *Backend) fairRelease(ctx context.Context, l driver.Lease) (released, error) {
	if s := &b.fair.handOver; s.query != "" {
		// The usual case, in one statement where the dialect can.
		var owner, notified string
		err := b.db.QueryRowContext(ctx, s.query, s.args(l.Key, l.Owner, listed(l.Owner))...).Scan(&owner, &notified)
		switch {
		case err == nil:
			return released{hold: true, handed: owner}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return released{}, err
		}
	}
	return begin(ctx, b, func(f txn) (released, error) { return f.release(l) })
}

func (f txn) release(l driver.Lease) (released, error) {
	b := f.b
	var out released
	n, err := f.exec(b.fair.release, l.Key, l.Owner, listed(l.Owner))
	if err != nil {
		return out, err
	}
	out.hold = n > 0
	if !out.hold {
		// Not a holder: a waiter giving up its place, if anything.
		left, err := f.exec(b.fair.dequeue, l.Key, l.Owner)
		if err != nil {
			return out, err
		}
		out.place = left > 0
	}
	if !out.hold && !out.place {
		return out, nil
	}
	r, err := f.lock(l.Key)
	if err != nil || !r.free() || r.kind != 0 {
		return out, err
	}
	head, place, err := f.head(l.Key)
	if err != nil {
		return out, err
	}
	if head == "" {
		_, err = f.exec(b.fair.count, l.Key)
	} else if _, err = f.grant(l.Key, head, place, "", ""); err == nil {
		out.handed = head
	}
	if err == nil && b.fair.handed.query != "" {
		// A turn's notice names the waiter, so that only it wakes.
		_, err = f.exec(b.fair.handed, l.Key, turn(out.handed))
	}
	return out, err
}

// turn is the prefix of the notice of a release that handed the lease to
// owner: the owner between commas; "" for a plain release.
func turn(owner string) string {
	if owner == "" {
		return ""
	}
	return listed(owner)
}
