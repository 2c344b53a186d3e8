package sqllock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	dl "github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// countingConnector opens connections of a real driver and records every
// request a connection makes of the server: statements run, prepared and
// closed, transactions begun, committed and rolled back, pings and
// session resets.
type countingConnector struct {
	drv driver.Driver
	dsn string
	mu  sync.Mutex
	log []string
}

func (c *countingConnector) note(what string) {
	c.mu.Lock()
	c.log = append(c.log, what)
	c.mu.Unlock()
}

// take returns what was recorded since the last call.
func (c *countingConnector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.log
	c.log = nil
	return l
}

func (c *countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &countingConn{c: c, Conn: conn}, nil
}

func (c *countingConnector) Driver() driver.Driver { return c.drv }

type countingConn struct {
	driver.Conn
	c *countingConnector
}

func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }

func (cc *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	cc.c.note("prepare " + oneLine(q))
	var (
		s   driver.Stmt
		err error
	)
	if p, ok := cc.Conn.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, q)
	} else {
		s, err = cc.Conn.Prepare(q)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: s, c: cc.c, q: oneLine(q)}, nil
}

func (cc *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cc.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, q, args)
	if !errors.Is(err, driver.ErrSkip) {
		cc.c.note("exec " + oneLine(q))
	}
	return r, err
}

func (cc *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	e, ok := cc.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.QueryContext(ctx, q, args)
	if !errors.Is(err, driver.ErrSkip) {
		cc.c.note("query " + oneLine(q))
	}
	return r, err
}

func (cc *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	cc.c.note("begin")
	bt, ok := cc.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("a driver without BeginTx")
	}
	tx, err := bt.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, c: cc.c}, nil
}

func (cc *countingConn) Ping(ctx context.Context) error {
	cc.c.note("ping")
	if p, ok := cc.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (cc *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := cc.Conn.(driver.SessionResetter); ok {
		cc.c.note("reset session")
		return r.ResetSession(ctx)
	}
	return nil
}

func (cc *countingConn) IsValid() bool {
	if v, ok := cc.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cc *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cc.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingStmt struct {
	driver.Stmt
	c *countingConnector
	q string
}

func (s *countingStmt) Close() error {
	s.c.note("close " + s.q)
	return s.Stmt.Close()
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.note("execute " + s.q)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errors.New("statement without ExecContext")
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.note("execute " + s.q)
	if e, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return e.QueryContext(ctx, args)
	}
	return nil, errors.New("statement without QueryContext")
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingTx struct {
	driver.Tx
	c *countingConnector
}

func (t countingTx) Commit() error   { t.c.note("commit"); return t.Tx.Commit() }
func (t countingTx) Rollback() error { t.c.note("rollback"); return t.Tx.Rollback() }

// counting opens a pool on d whose requests to the server are recorded.
func (d database) counting(t testing.TB) (*sql.DB, *countingConnector) {
	t.Helper()
	db := d.open(t) // for the driver
	c := &countingConnector{drv: db.Driver(), dsn: d.dsn}
	cdb := sql.OpenDB(c)
	t.Cleanup(func() { cdb.Close() })
	return cdb, c
}

// requests drops the session resets, which the drivers here answer
// without asking the server.
func requests(log []string) []string {
	var out []string
	for _, r := range log {
		if r != "reset session" {
			out = append(out, r)
		}
	}
	return out
}

// testStatements checks that an uncontended acquire and its release make
// one request of the server each: a statement prepared once per
// connection, not prepared and closed at each call, and no transaction;
// on PostgreSQL, a connection-scoped lock too (the native lock and the
// row in one statement).
func testStatements(t *testing.T, d database, opts ...sqllock.Option) {
	db, c := d.counting(t)
	b := d.backendOn(t, db, opts...)
	client := distlock.New(b, distlock.WithTTL(30*time.Second))
	ctx := context.Background()
	m := client.Mutex("count")
	// The first cycles create the tables, ask the database's name and
	// prepare the statements.
	for i := range 5 {
		l, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		acquire := requests(c.take())
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		release := requests(c.take())
		if i < 2 {
			continue
		}
		if len(acquire) != 1 || len(release) != 1 {
			t.Fatalf("cycle %d: an uncontended acquire made %d requests, its release %d; want 1 each:\nacquire:\n%s\nrelease:\n%s",
				i, len(acquire), len(release), strings.Join(acquire, "\n"), strings.Join(release, "\n"))
		}
	}
}

func TestStatementsPostgres(t *testing.T) {
	_, d := startPostgres(t)
	testStatements(t, d)
}

func TestStatementsPostgresConnScope(t *testing.T) {
	_, d := startPostgres(t)
	testStatements(t, d, sqllock.WithConnectionScope())
}

func TestStatementsMariaDB(t *testing.T) {
	_, d := startMariaDB(t)
	testStatements(t, d)
}

func TestStatementsSQLite(t *testing.T) { testStatements(t, sqliteFile(t)) }

// TestRefusalOneRequestMariaDB: on MySQL a refused mutex attempt is one
// request: the statement's reply carries the holder's remaining lease
// (the retry hint) and the row's family, with no read of the row after.
func TestRefusalOneRequestMariaDB(t *testing.T) {
	_, d := startMariaDB(t)
	ctx := ctxFor(t, time.Minute)
	holder := d.backend(t)
	held := dl.Request{Lease: dl.Lease{Key: "refused", Owner: "holder"}, TTL: time.Minute}
	if g, err := holder.Acquire(ctx, held); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	db, c := d.counting(t)
	other := d.backendOn(t, db)
	req := dl.Request{Lease: dl.Lease{Key: "refused", Owner: "other"}, TTL: time.Minute}
	for i := range 3 {
		c.take()
		g, err := other.Acquire(ctx, req)
		if err != nil || g.Acquired {
			t.Fatalf("attempt %d: %+v, %v; want refused", i, g, err)
		}
		if sent := requests(c.take()); i > 0 && len(sent) != 1 {
			t.Fatalf("attempt %d: a refusal made %d requests; want 1:\n%s", i, len(sent), strings.Join(sent, "\n"))
		}
		if g.RetryAfter < 30*time.Second || g.RetryAfter > time.Minute {
			t.Fatalf("attempt %d: RetryAfter %v; want the holder's remaining lease, under a minute", i, g.RetryAfter)
		}
	}
}

// TestFairStatementsPreparedMariaDB: on MySQL a fair attempt's
// transaction runs statements prepared once per connection, as the hot
// path's are (prepared on the pool in the background after their first
// use): once they are, a refused fair attempt that keeps its place in
// line sends no statement to prepare or close, only the statements
// themselves, also on a pool of one connection.
func TestFairStatementsPreparedMariaDB(t *testing.T) {
	_, d := startMariaDB(t)
	ctx := ctxFor(t, time.Minute)
	holder := d.backend(t)
	held := dl.Request{Lease: dl.Lease{Key: "fair-prepared", Owner: "holder"}, TTL: time.Minute, Fair: true}
	if g, err := holder.Acquire(ctx, held); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	db, c := d.counting(t)
	db.SetMaxOpenConns(1)
	other := d.backendOn(t, db)
	req := dl.Request{Lease: dl.Lease{Key: "fair-prepared", Owner: "other"}, TTL: time.Minute, Fair: true, Queue: time.Minute}
	var sent []string
	for i := range 20 {
		c.take()
		if g, err := other.Acquire(ctx, req); err != nil || g.Acquired {
			t.Fatalf("attempt %d: %+v, %v; want refused", i, g, err)
		}
		sent = requests(c.take())
		if !slices.ContainsFunc(sent, func(r string) bool { return strings.HasPrefix(r, "prepare ") || strings.HasPrefix(r, "close ") }) {
			return
		}
	}
	t.Fatalf("every fair attempt prepared or closed statements; the last sent %d requests:\n%s", len(sent), strings.Join(sent, "\n"))
}
