package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// The lease table is the default mode: a mutex is one row of the lease
// table (this file); read-write locks and semaphores add one row per
// holder in the holds table (holds.go), settled against the mutex by the
// row's family (kinds.go); fair mutexes keep their waiters in the queue
// table (fair.go); rows nobody uses are swept (reclaim.go).

// tableEngine is the lease table's engine.
type tableEngine struct{ b *Backend }

func (tableEngine) caps() driver.Capabilities {
	return driver.Capabilities{Reentrant: true, ReadWrite: true, Semaphore: true, Fair: true, Notify: true}
}

func (tableEngine) accepts(driver.Lease) error { return nil }

func (e tableEngine) acquire(ctx context.Context, req driver.Request, meta string) (driver.Grant, error) {
	b := e.b
	if req.Kind != driver.Exclusive {
		return b.acquireShared(ctx, req, meta)
	}
	reentry := ""
	if req.Reentry != "" {
		// The table keeps a digest, not the identity, which is a secret.
		sum := sha256.Sum256([]byte(req.Reentry))
		reentry = hex.EncodeToString(sum[:])
	}
	args := make([]any, 6, 7) // room for the listener or the gate, not a second slice
	args[0], args[1], args[2], args[3], args[4], args[5] = req.Key, req.Owner, micros(req.TTL), meta, reentry, listed(req.Owner)
	switch {
	case b.d.releaseOne != nil:
		// The listener a release may have named (see dialect.releaseOne).
		args = append(b.acquire.args(args...), b.hub.name())
	case b.gates.on:
		// The attempt's gate (see gate.go), set and ordered by
		// acquireGated.
		args = append(args, int64(0))
	default:
		args = b.acquire.args(args...)
	}
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
			g, family, err = b.acquireGated(ctx, req, args)
		}
		if err == nil && !g.Acquired && family == 0 && !req.Fair {
			b.relist(ctx, req.Key)
		}
		if err != nil || g.Acquired || family == 0 || settled {
			return g, err
		}
		if err := b.settleKind(ctx, req); err != nil {
			return driver.Grant{}, err
		}
	}
}

func (e tableEngine) release(ctx context.Context, l driver.Lease) (string, error) {
	b := e.b
	if l.Kind != driver.Exclusive {
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

func (e tableEngine) refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	b := e.b
	if l.Kind != driver.Exclusive {
		return b.refreshShared(ctx, l, ttl)
	}
	v, err := b.extend(ctx, ttl, b.refresh, b.holding, l.Key, listed(l.Owner))
	if err == nil && b.gates.on {
		b.renewed(l.ID(), ttl)
	}
	return v, err
}

// acquireGated is acquireOnce, on MySQL naming the gate of this backend
// that a release woke, for which the key is kept (see gate.go); a holder
// that waited takes the key's wake lock for its own waiters.
func (b *Backend) acquireGated(ctx context.Context, req driver.Request, args []any) (driver.Grant, int64, error) {
	if !b.gates.on {
		return b.acquireOnce(ctx, req, args)
	}
	w, gate := b.baton(req.Key)
	args[6] = gate
	g, family, err := b.acquireOnce(ctx, req, b.acquire.args(args...))
	switch {
	case w != nil:
		b.settle(w, err == nil && g.Acquired, req.ID(), req.TTL)
	case err == nil && g.Acquired && b.waited(req.Key):
		b.takeWake(ctx, req.ID(), req.TTL)
	}
	return g, family, err
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
		switch b.d.acquireReply {
		case replyRow:
			err = b.db.QueryRowContext(ctx, b.acquire.query, args...).Scan(&a.token, &a.left, &a.kind)
			if errors.Is(err, sql.ErrNoRows) { // the row appeared during the statement: held
				return answer{}, nil
			}
			a.granted = a.token > 0
		case replyInsertID:
			var res sql.Result
			if res, err = b.execHot(ctx, b.acquire, args...); err == nil {
				a.token, err = res.LastInsertId()
				a.granted = a.token > 0 && a.token < refusedBase
				if a.token >= refusedBase && err == nil {
					// The refusal's reply: the wait and the family.
					code := a.token - refusedBase
					a.kind = sql.NullInt64{Int64: code % 8, Valid: true}
					if left := code / 8; left > 0 {
						a.left = sql.NullInt64{Int64: left - 1, Valid: true}
					}
				}
			}
		default:
			err = b.scanHot(ctx, b.acquire, args, &a.token)
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
	if b.d.acquireReply != replyRow && !kind.Valid {
		// A second round trip, on the refused path only.
		err := b.scanHot(ctx, b.refused, b.refused.args(req.Key), &left, &kind)
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

// Placeholders: $1 name, $2 owner, $3 ttl in microseconds, $4 meta, $5
// the re-entrant identity's digest (empty for none), $6 the owner between
// commas, as it appears in the owners column.
func (b *Backend) prepareStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
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
	// The old row is t (ON CONFLICT names both it and excluded).
	next := strings.ReplaceAll(b.d.next, "token", "t.token")
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
	upsert = strings.ReplaceAll(b.d.mutexAcquire(upsert), "{turn}", b.turn)
	b.acquire = p(strings.NewReplacer("LIVE", live, "MINE", mine, "JOIN", join).Replace(upsert))
	b.refused = p(`SELECT expires_us - {now}, kind FROM {table} WHERE name = $1`)
	if b.gates.on {
		// A free key refuses only while it is kept for the waiter a
		// release woke (see gate.go): no hint, the watch tells.
		b.refused = p(`SELECT IF(owners = '', NULL, expires_us - {now}), kind FROM {table} WHERE name = $1`)
	}
	b.markStmt = p(b.d.mark)
	// The last hold leaves the row, with its token, marked free since now;
	// last_owner remembers the release so that its repeat reports
	// success. MySQL assigns left to right: owners, which the others read,
	// is assigned last.
	// A row that counts waiters in line is left to fairRelease.
	// The notice of the key's release goes in the same statement, where
	// the dialect notifies, and only while a waiter's mark on the row
	// lasts (see marks.go); a hold that leaves others sends none.
	ended := `owners = ''`
	if b.d.watched != "" {
		ended += ` AND ` + b.d.watched
	}
	if b.d.releaseOne != nil {
		// The notice names one listener of the key's waiters (see
		// marks.go).
		b.release = prepare(b.d, b.table, b.d.releaseOne(releaseStmt+` AND queued = 0`, ended))
		b.passOn = prepare(b.d, b.table, b.d.passOn)
	} else {
		b.release = noticed(b.d, b.table, releaseStmt+` AND queued = 0`, ended)
	}
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
