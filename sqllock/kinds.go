package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/distlock-go/distlock/driver"
)

// A key's row in the lease table says which family took the key last
// (kind: 0 mutex, 1 read-write lock, 3 semaphore, with lim its size), and
// every acquisition locks that row first, so a key has one family while
// any holding of it lasts. A mutex's statement refuses a row of another
// family; settleKind then asks the holds table whether that family still
// holds the key. An acquisition of a read-write lock or a permit reads the
// row (a live mutex refuses it) and the key's holds (live holds of another
// family or size refuse it) in its transaction, and sets the row's family
// when granted.

// beginTx starts a transaction on the key's row, with the dialect's
// options (see dialect.tx).
func (b *Backend) beginTx(ctx context.Context) (*sql.Tx, error) {
	return b.db.BeginTx(ctx, b.d.tx)
}

// kindError is the error of a request for req while the key is held as
// held (a family) of size lim: a *driver.KindError.
func kindError(req driver.Request, held driver.Kind, lim int) error {
	e := &driver.KindError{Key: req.Key, Held: held.Family(), Asked: req.Kind}
	if e.Held == driver.Permit {
		e.HeldLimit = lim
	}
	if req.Kind == driver.Permit {
		e.AskedLimit = req.Limit
	}
	return e
}

// settleKind is called when a mutex's attempt (req) met a row last taken
// as another family. In one transaction on the key's row it looks for
// live holds of the key: with none, it makes the row a mutex's again and
// returns nil, so that the attempt can be made again; with some, it
// returns an error wrapping a *driver.KindError.
func (b *Backend) settleKind(ctx context.Context, req driver.Request) error {
	_, err := begin(ctx, b, func(t txn) (struct{}, error) { return struct{}{}, t.settleKind(req) })
	if err != nil {
		return fmt.Errorf("sqllock: acquire: %w", err)
	}
	return nil
}

func (t txn) settleKind(req driver.Request) error {
	k := &t.b.kinds
	if _, err := t.exec(k.lock, req.Key); err != nil {
		return err
	}
	var kind, lim int
	switch err := t.row(k.read, []any{req.Key}, &kind, &lim); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	if kind == 0 {
		return nil
	}
	var held int
	switch err := t.row(k.live, []any{req.Key}, &held); {
	case err == nil:
		return kindError(req, driver.Kind(held), lim)
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	_, err := t.exec(k.reset, req.Key)
	return err
}

// kindStmts are the statements of settleKind. Placeholder: $1 name.
type kindStmts struct {
	lock, read, live, reset stmt
}

func (b *Backend) prepareKindStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
	b.kinds = kindStmts{
		lock:  p(`UPDATE {table} SET kind = kind WHERE name = $1`),
		read:  p(`SELECT kind, lim FROM {table} WHERE name = $1`),
		live:  p(`SELECT kind FROM {holds} WHERE name = $1 AND released_us = 0 AND expires_us > {now} AND kind <> ` + strconv.Itoa(claim) + ` LIMIT 1`),
		reset: p(`UPDATE {table} SET kind = 0, lim = 0 WHERE name = $1`),
	}
}
