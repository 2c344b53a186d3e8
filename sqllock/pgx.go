package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"

	"github.com/distlock-go/distlock/sqllock/internal/relisten"
)

// pgxStdlib is the package path of pgx's database/sql driver.
const pgxStdlib = "github.com/jackc/pgx/v5/stdlib"

// usesPgx reports whether db's driver is pgx v5's.
func usesPgx(db *sql.DB) bool {
	t := reflect.TypeOf(db.Driver())
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == pgxStdlib
}

// pgxListener is the listener New gives a backend on a *sql.DB of pgx v5
// (see [WithListener]). It calls pgx's own API (stdlib.Conn.Conn, then
// pgx.Conn's Exec and WaitForNotification) through reflection, so that
// sqllock does not import pgx and programs on other drivers do not build
// it. Package pglisten is the same listener, typed.
type pgxListener struct{ db *sql.DB }

// errNoRetry marks the errors that a new connection cannot mend.
var errNoRetry = errors.New("sqllock: listener")

// Listen implements Listener: it listens on a connection of the pool, and
// after losing it takes another (backing off from 50ms up to 2s), calling
// ready each time LISTEN is confirmed.
func (l pgxListener) Listen(ctx context.Context, channel string, ready func(), notice func(string)) error {
	return relisten.Run(ctx, errNoRetry, func(ctx context.Context) error { return l.session(ctx, channel, ready, notice) })
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// session listens on one connection until it fails or ctx is done. The
// connection is then discarded, never returned to the pool listening.
func (l pgxListener) session(ctx context.Context, channel string, ready func(), notice func(string)) error {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, wait, err := pgxMethods(dc)
		if err != nil {
			return err
		}
		// Exec(ctx, sql string, args ...any) (pgconn.CommandTag, error)
		exec := pc.MethodByName("Exec")
		out := exec.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(`LISTEN "` + channel + `"`)})
		if err, _ := out[1].Interface().(error); err != nil {
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		ready()
		for {
			// WaitForNotification(ctx) (*pgconn.Notification, error)
			out := wait.Call([]reflect.Value{reflect.ValueOf(ctx)})
			if err, _ := out[1].Interface().(error); err != nil {
				return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
			}
			if n := out[0]; !n.IsNil() {
				notice(n.Elem().FieldByName("Payload").String())
			}
		}
	})
}

// pgxMethods finds, in a connection of pgx's driver, its *pgx.Conn and
// the method WaitForNotification, checking the signatures this file
// calls.
func pgxMethods(dc any) (conn, wait reflect.Value, err error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: the driver connection %T: %s is not pgx v5's", errNoRetry, dc, what)
	}
	get := reflect.ValueOf(dc).MethodByName("Conn")
	if !get.IsValid() || get.Type().NumIn() != 0 || get.Type().NumOut() != 1 {
		return conn, wait, bad("Conn")
	}
	conn = get.Call(nil)[0]
	exec := conn.MethodByName("Exec")
	if !exec.IsValid() || !exec.Type().IsVariadic() || exec.Type().NumIn() != 3 || exec.Type().NumOut() != 2 ||
		exec.Type().In(0) != contextType || exec.Type().In(1).Kind() != reflect.String || exec.Type().Out(1) != errorType {
		return conn, wait, bad("Exec")
	}
	wait = conn.MethodByName("WaitForNotification")
	if !wait.IsValid() || wait.Type().NumIn() != 1 || wait.Type().In(0) != contextType || wait.Type().NumOut() != 2 ||
		wait.Type().Out(1) != errorType || wait.Type().Out(0).Kind() != reflect.Pointer {
		return conn, wait, bad("WaitForNotification")
	}
	if f, ok := wait.Type().Out(0).Elem().FieldByName("Payload"); !ok || f.Type.Kind() != reflect.String {
		return conn, wait, bad("Notification.Payload")
	}
	return conn, wait, nil
}
