package sqllock

import (
	"context"
	"database/sql"
	"sync"
)

// prepared keeps the statements of the hot path (acquire, release,
// refresh, a refusal's reading of the row, a waiter's poll) prepared on
// the pool, each connection preparing a statement
// once. Without it, MySQL's driver prepares, executes and closes a
// statement with arguments on every call (the server parses it each
// time), and SQLite compiles it each time. PostgreSQL's pgx keeps its own
// per-connection cache, so the PostgreSQL dialect runs statements as
// they are.
type prepared struct {
	mu     sync.RWMutex // held for reading while a prepared statement runs
	stmts  map[string]*sql.Stmt
	closed bool
}

// run calls fn with s prepared on b's pool, or with nil if s runs as it
// is: on PostgreSQL, after Close, or when preparing it failed (the
// statement then reports the error itself).
func (b *Backend) run(ctx context.Context, s stmt, fn func(*sql.Stmt)) {
	if !b.d.prepares {
		fn(nil)
		return
	}
	p := &b.prepared
	p.mu.RLock()
	ps, ok := p.stmts[s.query]
	if ok || p.closed {
		defer p.mu.RUnlock()
		fn(ps)
		return
	}
	p.mu.RUnlock()
	p.mu.Lock()
	if _, ok = p.stmts[s.query]; !ok && !p.closed {
		ps, err := b.db.PrepareContext(ctx, s.query)
		if err != nil {
			// Not prepared, and not to be looked up again: the statement
			// runs as it is and reports why (a closed pool, a server gone).
			p.mu.Unlock()
			fn(nil)
			return
		}
		if p.stmts == nil {
			p.stmts = make(map[string]*sql.Stmt)
		}
		p.stmts[s.query] = ps
	}
	p.mu.Unlock()
	b.run(ctx, s, fn)
}

// execHot runs s with args (ordered for s) on the pool.
func (b *Backend) execHot(ctx context.Context, s stmt, args ...any) (res sql.Result, err error) {
	b.run(ctx, s, func(ps *sql.Stmt) {
		if ps != nil {
			res, err = ps.ExecContext(ctx, args...)
		} else {
			res, err = b.db.ExecContext(ctx, s.query, args...)
		}
	})
	return res, err
}

// scanHot runs s, which selects one row, with args (ordered for s), and
// scans the row into dest.
func (b *Backend) scanHot(ctx context.Context, s stmt, args []any, dest ...any) (err error) {
	b.run(ctx, s, func(ps *sql.Stmt) {
		if ps != nil {
			err = ps.QueryRowContext(ctx, args...).Scan(dest...)
		} else {
			err = b.db.QueryRowContext(ctx, s.query, args...).Scan(dest...)
		}
	})
	return err
}

// close closes the prepared statements, once those running have ended;
// later calls run theirs as they are.
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, ps := range p.stmts {
		_ = ps.Close()
	}
	p.stmts = nil
}
