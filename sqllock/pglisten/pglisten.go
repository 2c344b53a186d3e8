// Package pglisten receives PostgreSQL notifications for sqllock on one
// connection of a *sql.DB opened with the pgx driver
// (github.com/jackc/pgx/v5/stdlib). A backend on pgx has the same
// listener without being told; pass this one to sqllock.WithListener to
// say so in code:
//
//	b, err := sqllock.New(db, sqllock.WithListener(pglisten.New(db)))
//
// It is a package of its own so that programs using sqllock without it do
// not build pgx. The listening connection is taken from db's pool for the
// backend's life: count it in db.SetMaxOpenConns.
package pglisten

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock-go/distlock/sqllock/internal/relisten"
)

// Listener implements sqllock.Listener on a *sql.DB of the pgx driver.
type Listener struct {
	db *sql.DB
}

// New returns a listener that takes its connection from db.
func New(db *sql.DB) *Listener { return &Listener{db: db} }

var plain = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// errFatal marks the errors that a new connection cannot mend.
var errFatal = errors.New("pglisten")

// Listen implements sqllock.Listener: it listens on a connection of the
// pool, and after losing it takes another (backing off from 50ms up to
// 2s), calling ready each time LISTEN is confirmed.
func (l *Listener) Listen(ctx context.Context, channel string, ready func(), notice func(string)) error {
	if l == nil || l.db == nil {
		return fmt.Errorf("%w: nil *sql.DB", errFatal)
	}
	if !plain.MatchString(channel) {
		return fmt.Errorf("%w: channel %q is not a plain identifier", errFatal, channel)
	}
	return relisten.Run(ctx, errFatal, func(ctx context.Context) error { return l.session(ctx, channel, ready, notice) })
}

// session listens on one connection until it fails or ctx is done. The
// connection is then discarded, never returned to the pool listening.
func (l *Listener) session(ctx context.Context, channel string, ready func(), notice func(string)) error {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the *sql.DB's driver connection is %T, not pgx's", errFatal, dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
			}
			notice(n.Payload)
		}
	})
}
