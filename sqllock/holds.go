package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Read-write locks and semaphores keep one row per holder in a second
// table, the lease table's name followed by "_holds" (see [Schema]), since
// each reader and each permit expires with its own holder. The key's row
// in the lease table is their mutex and their token counter: an
// acquisition locks it, clears the key's expired holds, reads the others
// and decides, in one transaction. That is six round trips (lock, clear,
// read, count the token, add the hold, commit) where a mutex takes one;
// Release and Refresh stay single statements.
//
// On MySQL the transaction runs at READ COMMITTED (see beginTx).

// claim is the kind of a waiting writer's row: it keeps new readers out
// until its Queue runs out.
const claim = 9

// holdsTable names the holds table of a lease table.
func holdsTable(table string) string { return table + "_holds" }

// holdsSchema is the DDL of the holds table:
//
//	name        the key
//	owner       the holder's owner token
//	kind        1 write, 2 read, 3 permit (driver.Kind), 9 a waiting
//	            writer's claim
//	token       the hold's fencing token, from the key's counter
//	expires_us  the hold's end by the database clock; 0 once released
//	released_us when the hold was released, or 0
//	meta        the holder's metadata, a JSON object
func holdsSchema(d *dialect, table string) string {
	key, owner, kind, text, tail := d.types.key, d.types.owner, d.types.kind, d.types.text, d.types.tail
	return `CREATE TABLE IF NOT EXISTS ` + holdsTable(table) + ` (
	name        ` + key + ` NOT NULL,
	owner       ` + owner + ` NOT NULL,
	kind        ` + kind + ` NOT NULL,
	token       BIGINT NOT NULL,
	expires_us  BIGINT NOT NULL,
	released_us BIGINT NOT NULL DEFAULT 0,
	meta        ` + text + `,
	PRIMARY KEY (name, owner)
)` + tail
}

// holdStmts are the statements on the holds table. Placeholders: $1 name,
// $2 owner, $3 ttl (µs), $4 kind, $5 token, $6 meta.
type holdStmts struct {
	lock, state, clear, list, count, add, extend, release, withdraw, released, refresh, holding, inspect stmt
}

func (b *Backend) prepareHoldStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
	s := &b.holds
	live := `released_us = 0 AND expires_us > {now} AND kind <> ` + strconv.Itoa(claim)
	// The key's row, created if need be, locked until the commit; it
	// tells whether a mutex holds the key, and which family took it last
	// (see kinds.go). count issues the next token, records the family ($2,
	// with $3 the semaphore's size) and marks the row as changed now,
	// which keeps it from a sweeper that has not seen the new hold's row.
	const state = `kind, lim, owners <> '' AND expires_us > {now}`
	lock, read := b.d.lockRow(state)
	s.lock, s.state = p(lock), p(read)
	s.count = p(`UPDATE {table} SET token = {next}, kind = $2, lim = $3, expires_us = {now} WHERE name = $1{returning}`)
	s.clear = p(`DELETE FROM {holds} WHERE name = $1 AND ((released_us = 0 AND expires_us <= {now}) OR (released_us > 0 AND released_us < {now} - ` + strconv.FormatInt(reclaimAfter.Microseconds(), 10) + `))`)
	s.list = p(`SELECT owner, kind, token, expires_us - {now}, released_us FROM {holds} WHERE name = $1`)
	const cols = `(name, owner, kind, token, expires_us, released_us, meta) VALUES ($1, $2, $4, $5, {now} + $3, 0, $6)`
	s.add = p(`INSERT INTO {holds} ` + cols + ` ON CONFLICT (name, owner) DO UPDATE SET kind = excluded.kind, token = excluded.token, expires_us = excluded.expires_us, released_us = 0, meta = excluded.meta`)
	s.extend = p(`UPDATE {holds} SET expires_us = {now} + $3 WHERE name = $1 AND owner = $2`)
	release := `UPDATE {holds} SET released_us = {now}, expires_us = 0 WHERE name = $1 AND owner = $2 AND ` + live
	withdraw := `DELETE FROM {holds} WHERE name = $1 AND owner = $2 AND kind = ` + strconv.Itoa(claim)
	// Ending a hold, or withdrawing a waiting writer's claim (which kept
	// readers out), notifies the key's waiters.
	s.release, s.withdraw = noticed(b.d, b.table, release, "true"), noticed(b.d, b.table, withdraw, "true")
	s.released = p(`SELECT 1 FROM {holds} WHERE name = $1 AND owner = $2 AND released_us > 0`)
	s.refresh = p(`UPDATE {holds} SET expires_us = {now} + $3 WHERE name = $1 AND owner = $2 AND ` + live)
	s.holding = p(`SELECT 1 FROM {holds} WHERE name = $1 AND owner = $2 AND ` + live)
	s.inspect = p(`SELECT kind, token, expires_us - {now}, meta FROM {holds} WHERE name = $1 AND ` + live)
}

// hold is a row of the holds table.
type hold struct {
	owner    string
	kind     int
	token    int64
	left     int64 // µs
	released int64
}

// acquireShared makes one attempt at a Write, Read or Permit lease, in
// one transaction, made twice if it meets a conflict (see retryConflict).
func (b *Backend) acquireShared(ctx context.Context, req driver.Request, meta string) (driver.Grant, error) {
	g, err := begin(ctx, b, func(t txn) (driver.Grant, error) { return t.acquireShared(req, meta) })
	if err != nil {
		return driver.Grant{}, fmt.Errorf("sqllock: acquire: %w", err)
	}
	return g, nil
}

func (t txn) acquireShared(req driver.Request, meta string) (driver.Grant, error) {
	s := &t.b.holds
	lim, err := t.lockShared(req)
	if err != nil {
		return driver.Grant{}, err
	}
	holds, err := t.holdsOf(req.Key)
	if err != nil {
		return driver.Grant{}, err
	}
	c := tally(holds, req)
	if err := c.compatible(req, lim); err != nil {
		return driver.Grant{}, err
	}
	if m := c.mine; m != nil && m.released == 0 && m.kind != claim {
		// A repeat: the same grant, extended.
		if _, err := t.exec(s.extend, req.Key, req.Owner, micros(req.TTL)); err != nil {
			return driver.Grant{}, err
		}
		return t.b.granted(req, m.token), nil
	}
	if !c.admits(req) {
		if req.Kind == driver.Write && req.Queue > 0 {
			if _, err := t.exec(s.add, req.Key, req.Owner, micros(req.Queue), claim, 0, ""); err != nil {
				return driver.Grant{}, err
			}
		}
		return driver.Grant{RetryAfter: max(time.Duration(c.wait)*time.Microsecond, time.Millisecond)}, nil
	}
	token, err := t.countShared(req)
	if err != nil {
		return driver.Grant{}, err
	}
	if _, err := t.exec(s.add, req.Key, req.Owner, micros(req.TTL), int(req.Kind), token, meta); err != nil {
		return driver.Grant{}, err
	}
	return t.b.granted(req, token), nil
}

// granted is the grant of req with token.
func (b *Backend) granted(req driver.Request, token int64) driver.Grant {
	return driver.Grant{Acquired: true, Token: uint64(token), ValidFor: req.TTL - b.drift(req.TTL)}
}

// lockShared locks the key's row, creating it if need be, and returns the
// size of the semaphore that took it last; an error wrapping a
// *driver.KindError if a mutex holds it.
func (t txn) lockShared(req driver.Request) (lim int, err error) {
	s := &t.b.holds
	var (
		family int
		mutex  bool // a mutex holds the key
	)
	err = t.lockRow(s.lock, s.state, req.Key, &family, &lim, &mutex)
	if err == nil && mutex {
		err = kindError(req, driver.Exclusive, 0)
	}
	return lim, err
}

// holdsOf clears the key's expired holds and reads the others.
func (t txn) holdsOf(key string) ([]hold, error) {
	s := &t.b.holds
	if _, err := t.exec(s.clear, key); err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(t.ctx, s.list.query, s.list.args(key)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var holds []hold
	for rows.Next() {
		var h hold
		if err := rows.Scan(&h.owner, &h.kind, &h.token, &h.left, &h.released); err != nil {
			return nil, err
		}
		holds = append(holds, h)
	}
	return holds, rows.Err()
}

// countShared issues the key's next token and records the family of req.
func (t txn) countShared(req driver.Request) (int64, error) {
	s := &t.b.holds
	args := []any{req.Key, int(req.Kind.Family()), 0}
	if req.Kind == driver.Permit {
		args[2] = req.Limit
	}
	return t.token(s.count, args...)
}

// holdCount is what the holds of a key mean to an attempt.
type holdCount struct {
	holds                               []hold
	mine                                *hold
	writers, readers, permits, claimers int
	wait                                int64 // µs until the longest hold in the way ends
}

// tally counts the live holds of others by kind.
func tally(holds []hold, req driver.Request) holdCount {
	c := holdCount{holds: holds}
	for i, h := range holds {
		if h.owner == req.Owner {
			c.mine = &holds[i]
			continue
		}
		if h.released > 0 {
			continue
		}
		switch driver.Kind(h.kind) {
		case driver.Write:
			c.writers++
		case driver.Read:
			c.readers++
		case driver.Permit:
			c.permits++
		default:
			c.claimers++
		}
		if inTheWay(req.Kind, h.kind) {
			c.wait = max(c.wait, h.left)
		}
	}
	return c
}

// compatible returns a *driver.KindError if a live hold of another is of
// a family (or semaphore size, lim) that req cannot share the key with.
func (c holdCount) compatible(req driver.Request, lim int) error {
	for _, h := range c.holds {
		if h.owner == req.Owner || h.released > 0 || h.kind == claim || h.left <= 0 {
			continue
		}
		if held := driver.Kind(h.kind); !driver.Compatible(held, lim, req.Kind, req.Limit) {
			return kindError(req, held, lim)
		}
	}
	return nil
}

// admits reports whether the holds of others let req in.
func (c holdCount) admits(req driver.Request) bool {
	switch req.Kind {
	case driver.Write:
		return c.writers+c.readers+c.permits == 0
	case driver.Read:
		return c.writers+c.claimers == 0
	case driver.Permit:
		return c.permits < req.Limit
	}
	return false
}

// inTheWay reports whether a live row of kind k can keep out an attempt
// of kind want, and so counts towards its RetryAfter: for a reader, a
// writer's hold or a waiting writer's claim (which lapses with its Queue),
// not another reader's; for a writer or a permit, any hold and no claim.
func inTheWay(want driver.Kind, k int) bool {
	if want == driver.Read {
		return k == int(driver.Write) || k == claim
	}
	return k != claim
}

// releaseShared ends a Write, Read or Permit hold, or withdraws a waiting
// writer's claim.
func (b *Backend) releaseShared(ctx context.Context, l driver.Lease) error {
	s := &b.holds
	var withdrawn int64
	released, err := b.exec(ctx, s.release, l.Key, l.Owner)
	if err == nil && released == 0 {
		withdrawn, err = b.exec(ctx, s.withdraw, l.Key, l.Owner)
	}
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: release: %w", err)
	case released > 0:
		return nil
	case withdrawn > 0:
		return driver.ErrNotHeld // a claim, not a hold
	}
	var one int
	err = b.db.QueryRowContext(ctx, s.released.query, s.released.args(l.Key, l.Owner)...).Scan(&one)
	switch {
	case err == nil:
		return nil // a repeat
	case errors.Is(err, sql.ErrNoRows):
		return driver.ErrNotHeld
	}
	return fmt.Errorf("sqllock: release: %w", err)
}

// refreshShared extends a Write, Read or Permit hold.
func (b *Backend) refreshShared(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	return b.extend(ctx, ttl, b.holds.refresh, b.holds.holding, l.Key, l.Owner)
}

// inspectShared describes the live holds of key, if any: its kind, their
// number, the newest token and its holder's metadata, the longest TTL.
func (b *Backend) inspectShared(ctx context.Context, key string, info *driver.Info) (metaJSON string, err error) {
	s := &b.holds
	rows, err := b.db.QueryContext(ctx, s.inspect.query, s.inspect.args(key)...)
	if err != nil {
		return "", fmt.Errorf("sqllock: inspect: %w", err)
	}
	defer rows.Close()
	var newest int64
	for rows.Next() {
		var (
			kind        int
			token, left int64
			meta        string
		)
		if err := rows.Scan(&kind, &token, &left, &meta); err != nil {
			return "", fmt.Errorf("sqllock: inspect: %w", err)
		}
		info.Held, info.Kind = true, driver.Kind(kind)
		info.Holds++
		info.TTL = max(info.TTL, time.Duration(left)*time.Microsecond)
		if token > newest {
			newest, metaJSON = token, meta
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("sqllock: inspect: %w", err)
	}
	if info.Held {
		info.Token = uint64(newest)
	}
	return metaJSON, nil
}
