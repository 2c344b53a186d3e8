package fence_test

import (
	"errors"
	"testing"

	"github.com/distlock-go/distlock/fence"
)

// result is an sql.Result with a fixed RowsAffected.
type result struct {
	n   int64
	err error
}

func (r result) LastInsertId() (int64, error) { return 0, errors.New("not supported") }
func (r result) RowsAffected() (int64, error) { return r.n, r.err }

func TestCheckResult(t *testing.T) {
	execErr := errors.New("connection refused")
	rowsErr := errors.New("RowsAffected not supported")
	tests := []struct {
		name    string
		res     result
		err     error
		wantIs  error // nil: want a nil error
		isStale bool
	}{
		{"one row", result{n: 1}, nil, nil, false},
		{"several rows", result{n: 3}, nil, nil, false},
		{"no row", result{n: 0}, nil, fence.ErrStale, true},
		{"exec error", result{n: 1}, execErr, execErr, false},
		{"exec error and no row", result{n: 0}, execErr, execErr, false},
		{"rows affected error", result{err: rowsErr}, nil, rowsErr, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fence.CheckResult(tt.res, tt.err)
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("CheckResult = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("CheckResult = %v, want an error wrapping %v", err, tt.wantIs)
			}
			if got := errors.Is(err, fence.ErrStale); got != tt.isStale {
				t.Fatalf("errors.Is(%v, ErrStale) = %v, want %v", err, got, tt.isStale)
			}
		})
	}
}

func TestCheckResultNil(t *testing.T) {
	if err := fence.CheckResult(nil, nil); err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("CheckResult(nil, nil) = %v, want a non-stale error", err)
	}
}
