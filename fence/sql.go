package fence

import (
	"database/sql"
	"errors"
	"fmt"
)

// CheckResult interprets the result of a fenced UPDATE, one whose WHERE
// clause includes "fence_token <= $token" (see the package documentation).
// It takes the two results of Exec directly:
//
//	err = fence.CheckResult(db.ExecContext(ctx, query, args...))
//
// CheckResult returns err if it is not nil, the error of RowsAffected if
// that fails (some drivers do not support it), an error wrapping [ErrStale]
// if no row was affected, and nil otherwise. It cannot tell a row that a
// later holder wrote from a row that does not exist: create rows before
// fenced updates reach them.
func CheckResult(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if res == nil {
		return errors.New("fence: CheckResult with a nil sql.Result")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: rows affected: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the fenced update matched no row (a higher token is stored, or the row does not exist)", ErrStale)
	}
	return nil
}
