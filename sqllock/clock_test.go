package sqllock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/sqllock"
)

// recorder is a database/sql driver around a real one that records the
// arguments of every statement, to show what the client sends.
type recorder struct {
	inner driver.Driver
	mu    sync.Mutex
	args  []any
}

func (r *recorder) Open(dsn string) (driver.Conn, error) {
	c, err := r.inner.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, r: r}, nil
}

func (r *recorder) record(args []driver.NamedValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range args {
		r.args = append(r.args, a.Value)
	}
}

type recordingConn struct {
	driver.Conn
	r *recorder
}

func (c *recordingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.r.record(args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *recordingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.record(args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *recordingConn) CheckNamedValue(v *driver.NamedValue) error {
	if nvc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nvc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

// TestNoClientClock: no client time reaches the database, so a client
// whose clock is off by any amount gets the same expiry as any other: every
// number sent is a lease length, every string a key, owner or metadata.
// Expiry is then set and judged by the database's clock alone.
func TestNoClientClock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect sqllock.Dialect
		db      func(t *testing.T) database
	}{
		{"postgres", sqllock.Postgres, func(t *testing.T) database { _, d := startPostgres(t); return d }},
		{"sqlite", sqllock.SQLite, func(t *testing.T) database { return sqliteFile(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.db(t)
			base := d.open(t)
			rec := &recorder{inner: base.Driver()}
			name := fmt.Sprintf("recording-%s-%p", tc.name, rec)
			sql.Register(name, rec)
			db, err := sql.Open(name, d.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			b, err := sqllock.New(db, sqllock.WithDialect(tc.dialect))
			if err != nil {
				t.Fatal(err)
			}
			const ttl = 2 * time.Second
			c := distlock.New(b, distlock.WithTTL(ttl))
			ctx := ctxFor(t, 20*time.Second)
			l, err := c.Mutex("clock").Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := l.Refresh(ctx, 2*ttl); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if _, err := c.Inspect(ctx, "clock"); err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if _, err := c.Mutex("clock").TryLock(ctx); err == nil {
				t.Fatalf("TryLock of a held key succeeded")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.args) == 0 {
				t.Fatalf("no statement arguments recorded: the recorder is not in the path")
			}
			lengths := map[int64]bool{ttl.Microseconds(): true, (2 * ttl).Microseconds(): true}
			for _, a := range rec.args {
				switch v := a.(type) {
				case int64:
					if !lengths[v] {
						t.Errorf("a number sent that is not a lease length: %d", v)
					}
				case string:
					if strings.Contains(v, fmt.Sprint(time.Now().Unix()/1000)) {
						t.Errorf("a string sent that looks like the client's time: %q", v)
					}
				default:
					t.Errorf("an argument of type %T sent: %v", a, a)
				}
			}
		})
	}
}
