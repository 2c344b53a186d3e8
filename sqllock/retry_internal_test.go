package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestConflict(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, true},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1213}), true},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout"}, false},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("x: %w", &pgconn.PgError{Code: "23505"}), false},
		{sql.ErrNoRows, false},
		{errors.New("Error 1213: not a driver's error"), false},
		{liteError{Code: 5, ExtendedCode: 5}, true},                        // SQLITE_BUSY
		{fmt.Errorf("x: %w", liteError{Code: 6, ExtendedCode: 262}), true}, // SQLITE_LOCKED_SHAREDCACHE
		{&liteError{Code: 5, ExtendedCode: 517}, true},                     // SQLITE_BUSY_SNAPSHOT
		{liteError{Code: 19, ExtendedCode: 1555}, false},                   // SQLITE_CONSTRAINT_PRIMARYKEY
	} {
		if got := conflict(tc.err); got != tc.want {
			t.Errorf("conflict(%T %v) = %v; want %v", tc.err, tc.err, got, tc.want)
		}
	}
}

// liteError is shaped like the Error of github.com/mattn/go-sqlite3,
// which that driver returns by value: its codes are fields, not methods.
type liteError struct {
	Code         liteErrNo
	ExtendedCode liteErrNoExtended
	SystemErrno  syscall.Errno
	err          string
}

type (
	liteErrNo         int
	liteErrNoExtended int
)

func (e liteError) Error() string {
	return fmt.Sprintf("sqlite error %d (%d)%s", e.Code, e.ExtendedCode, e.err)
}

// TestRetryConflict: an attempt that meets a conflict is made once more,
// and only once; other errors are returned at once.
func TestRetryConflict(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	other := errors.New("syntax error")
	for _, tc := range []struct {
		name      string
		errs      []error // the answers of successive attempts
		wantCalls int
		wantErr   error
	}{
		{"success", []error{nil}, 1, nil},
		{"other error", []error{other, nil}, 1, other},
		{"one conflict", []error{deadlock, nil}, 2, nil},
		{"two conflicts", []error{deadlock, deadlock, nil}, 2, deadlock},
	} {
		calls := 0
		v, err := retryConflict(context.Background(), func() (int, error) {
			calls++
			return calls, tc.errs[calls-1]
		})
		if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (err == nil && v != calls) {
			t.Errorf("%s: %d calls, %v, %v; want %d calls, %v", tc.name, calls, v, err, tc.wantCalls, tc.wantErr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	if _, err := retryConflict(ctx, func() (int, error) { calls++; return 0, deadlock }); calls != 1 || err == nil {
		t.Errorf("after ctx ended: %d calls, %v; want 1 call and the conflict", calls, err)
	}
}
