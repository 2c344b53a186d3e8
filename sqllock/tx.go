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

// exec runs s and returns the number of rows it changed.
func (t txn) exec(s stmt, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(t.ctx, s.query, s.args(args...)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// row runs s, which selects one row, and scans it into dest.
func (t txn) row(s stmt, args []any, dest ...any) error {
	return t.tx.QueryRowContext(t.ctx, s.query, s.args(args...)...).Scan(dest...)
}

// insertID runs s and returns the value of LAST_INSERT_ID(expr) it set
// (MySQL).
func (t txn) insertID(s stmt, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(t.ctx, s.query, s.args(args...)...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
