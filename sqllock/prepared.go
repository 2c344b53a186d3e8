package sqllock

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// prepared keeps the statements of the hot path (acquire, release,
// refresh, a refusal's reading of the row, a waiter's poll) and of the
// transactions (fair attempts and releases, read-write locks and
// semaphores) prepared on the pool, each connection preparing a statement
// once. Without it, MySQL's driver prepares, executes and closes a
// statement with arguments on every call (the server parses it each
// time), and SQLite compiles it each time. PostgreSQL's pgx keeps its own
// per-connection cache, so the PostgreSQL dialect runs statements as
// they are.
type prepared struct {
	mu      sync.RWMutex // held for reading while a prepared statement runs
	stmts   map[string]*sql.Stmt
	closed  bool
	warming map[string]bool // being prepared for runPrepared's next calls
}

// runReady calls fn with the statement of query, holding the read lock,
// if it is prepared already, or with nil once the set is closed; it
// reports whether it did.
func (p *prepared) runReady(query string, fn func(*sql.Stmt)) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ps, ok := p.stmts[query]
	if !ok && !p.closed {
		return false
	}
	fn(ps)
	return true
}

// runPrepared calls fn with s prepared on b's pool if it is already, as
// run does, and with nil otherwise; s is then prepared on the pool in
// the background, for the next calls. A transaction's statements run so:
// the transaction has a connection of the pool, and preparing a
// statement on the pool may wait for another, which a small pool may
// never have to spare.
func (b *Backend) runPrepared(s stmt, fn func(*sql.Stmt)) {
	if !b.d.prepares {
		fn(nil)
		return
	}
	p := &b.prepared
	if p.runReady(s.query, fn) {
		return
	}
	p.mu.Lock()
	warm := !p.closed && !p.warming[s.query]
	if warm {
		if p.warming == nil {
			p.warming = make(map[string]bool)
		}
		p.warming[s.query] = true
	}
	p.mu.Unlock()
	if warm {
		go func() {
			// Prepared without the lock, which the transaction's next
			// statements take while this waits for a connection.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ps, err := b.db.PrepareContext(ctx, s.query)
			p.mu.Lock()
			delete(p.warming, s.query)
			if err == nil && !p.closed && p.stmts[s.query] == nil {
				if p.stmts == nil {
					p.stmts = make(map[string]*sql.Stmt)
				}
				p.stmts[s.query], ps = ps, nil
			}
			p.mu.Unlock()
			if ps != nil {
				_ = ps.Close()
			}
		}()
	}
	fn(nil)
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
	if p.runReady(s.query, fn) {
		return
	}
	p.mu.Lock()
	if _, ok := p.stmts[s.query]; !ok && !p.closed {
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
