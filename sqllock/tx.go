package sqllock

import (
	"context"
	"database/sql"
)

// txn is one transaction of an attempt: its statements, in its context.
type txn struct {
	b   *Backend
	ctx context.Context
	tx  *sql.Tx
}

// begin runs fn in a transaction, committed if fn returns no error and
// rolled back otherwise, and made twice if it meets a conflict (see
// retryConflict).
func begin[T any](ctx context.Context, b *Backend, fn func(txn) (T, error)) (T, error) {
	return retryConflict(ctx, func() (T, error) {
		var zero T
		tx, err := b.beginTx(ctx)
		if err != nil {
			return zero, err
		}
		v, err := fn(txn{b: b, ctx: ctx, tx: tx})
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			_ = tx.Rollback()
			return zero, err
		}
		return v, nil
	})
}

// on calls fn with s for the transaction: on the dialects that prepare
// (see prepared), the pool's prepared statement once there is one, which
// a connection prepares once, where MySQL's driver would prepare, run and
// close a statement at each call (three requests for one); nil otherwise.
func (t txn) on(s stmt, fn func(*sql.Stmt)) {
	t.b.runPrepared(s, func(ps *sql.Stmt) {
		if ps == nil {
			fn(nil)
			return
		}
		ts := t.tx.StmtContext(t.ctx, ps)
		defer ts.Close()
		fn(ts)
	})
}

// result runs s.
func (t txn) result(s stmt, args []any) (res sql.Result, err error) {
	args = s.args(args...)
	t.on(s, func(ps *sql.Stmt) {
		if ps != nil {
			res, err = ps.ExecContext(t.ctx, args...)
		} else {
			res, err = t.tx.ExecContext(t.ctx, s.query, args...)
		}
	})
	return res, err
}

// exec runs s and returns the number of rows it changed.
func (t txn) exec(s stmt, args ...any) (int64, error) {
	res, err := t.result(s, args)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// row runs s, which selects one row, and scans it into dest.
func (t txn) row(s stmt, args []any, dest ...any) (err error) {
	args = s.args(args...)
	t.on(s, func(ps *sql.Stmt) {
		if ps != nil {
			err = ps.QueryRowContext(t.ctx, args...).Scan(dest...)
		} else {
			err = t.tx.QueryRowContext(t.ctx, s.query, args...).Scan(dest...)
		}
	})
	return err
}

// insertID runs s and returns the value of LAST_INSERT_ID(expr) it set
// (MySQL).
func (t txn) insertID(s stmt, args ...any) (int64, error) {
	res, err := t.result(s, args)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// lockRow runs lock, which locks a key's row (see dialect.lockRow), and
// scans the row into dest: from lock's reply, or from read's where the
// dialect's lock returns nothing.
func (t txn) lockRow(lock, read stmt, key string, dest ...any) error {
	if read.query == "" {
		return t.row(lock, []any{key}, dest...)
	}
	if _, err := t.exec(lock, key); err != nil {
		return err
	}
	return t.row(read, []any{key}, dest...)
}

// token runs s, which sets a token, and returns it: selected by its
// RETURNING clause, or as the LAST_INSERT_ID it set (dialect.byInsertID).
func (t txn) token(s stmt, args ...any) (int64, error) {
	if t.b.d.byInsertID {
		return t.insertID(s, args...)
	}
	var token int64
	err := t.row(s, args, &token)
	return token, err
}
