package sqllock

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"time"
)

// An attempt that the database refused for a conflict with a concurrent
// one (a deadlock, a serialisation failure, a busy SQLite file) was
// rolled back whole, so it is made once more before the caller hears of
// it: a caller asks whether it got the lock, and "another attempt got in
// the way" is a refusal it would not know to retry. Attempts on one key
// queue on its row and do not deadlock; attempts on different keys may,
// on InnoDB, through the locks on the gaps between rows of the holds
// table.

// maxRetryPause bounds the random pause before the second try, which
// keeps the two parties of a deadlock from meeting again.
const maxRetryPause = 5 * time.Millisecond

// retryConflict runs attempt, and once more if it failed with a conflict
// (see [conflict]) and ctx is not done.
func retryConflict[T any](ctx context.Context, attempt func() (T, error)) (T, error) {
	v, err := attempt()
	if err == nil || !conflict(err) {
		return v, err
	}
	select {
	case <-ctx.Done():
		return v, err
	case <-time.After(rand.N(maxRetryPause)):
	}
	return attempt()
}

// conflict reports whether err is the database's report of a conflict
// with a concurrent transaction, after which the statement or transaction
// was rolled back and may be tried again: PostgreSQL's SQLSTATE 40001
// (serialization_failure) and 40P01 (deadlock_detected), MySQL's error
// 1213 (ER_LOCK_DEADLOCK), SQLite's SQLITE_BUSY and SQLITE_LOCKED, with
// their extended codes. sqllock imports no driver, so the errors are
// recognised by method: SQLState() (pgx), Code() (modernc.org/sqlite);
// or by field: Number of go-sql-driver/mysql's *MySQLError, Code and
// ExtendedCode of mattn/go-sqlite3's Error (see [sqliteFieldCode]).
func conflict(err error) bool {
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		s := pg.SQLState()
		return s == "40001" || s == "40P01"
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		c := lite.Code() & 0xff // the primary code of an extended one
		return c == 5 || c == 6
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if mysqlErrorNumber(e) == 1213 {
			return true
		}
		if c, ok := sqliteFieldCode(e); ok {
			c &= 0xff
			return c == 5 || c == 6
		}
	}
	return false
}

// sqliteFieldCode is the Code of an error shaped like the Error of
// github.com/mattn/go-sqlite3, which that driver returns by value: a
// struct, or a pointer to one, with integer fields Code (the primary
// result code) and ExtendedCode. ok is false for any other error.
func sqliteFieldCode(err error) (code int64, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	// Fields of the struct itself only: a promoted one may lie behind a
	// nil embedded pointer.
	field := func(name string) (reflect.Value, bool) {
		f, ok := v.Type().FieldByName(name)
		if !ok || len(f.Index) != 1 {
			return reflect.Value{}, false
		}
		fv := v.Field(f.Index[0])
		return fv, fv.CanInt()
	}
	c, ok := field("Code")
	if _, extOK := field("ExtendedCode"); !ok || !extOK {
		return 0, false
	}
	return c.Int(), true
}

// mysqlErrorNumber is the Number of a go-sql-driver/mysql *MySQLError, or
// 0 for any other error.
func mysqlErrorNumber(err error) uint64 {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	t := v.Elem().Type()
	if t.Name() != "MySQLError" || t.PkgPath() != "github.com/go-sql-driver/mysql" {
		return 0
	}
	if n := v.Elem().FieldByName("Number"); n.IsValid() && n.CanUint() {
		return n.Uint()
	}
	return 0
}
