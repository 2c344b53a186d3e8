package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"time"
)

// The rows of keys nobody holds are deleted, so that the tables do not
// grow with every key ever locked. A sweeper does it, on a timer that runs
// while the backend is in use and the tables have rows: a key's row goes
// once the key has been free for reclaimAfter and no hold row of it is
// left; a hold's row goes reclaimAfter after its release or expiry.
//
// Tokens must still never go back when a deleted key is locked again. On
// PostgreSQL every token comes from the table's sequence, whatever the
// rows. On MySQL and SQLite each key counts on in its row, and a new row
// starts above the floor row (the empty name), which the sweeper raises to the
// tokens of the rows it deletes, in the same transaction and before
// deleting them. SQLite runs one writing statement at a time; on MySQL
// the sweeper holds the floor row exclusively until it commits and every
// statement that may create a key's row reads the floor under a shared
// lock, so no new row can start from a floor read before the sweeper
// raised it.

// reclaimAfter is how long a free key's row and a released hold's row
// stay: also the window in which a repeated release is recognised.
const reclaimAfter = 10 * time.Second

// sweepEvery is the sweeper's period while the tables have rows.
const sweepEvery = reclaimAfter / 2

// maxSweepFailures is how many sweeps in a row may fail (the database is
// down, say) before the sweeper waits for the backend's next call.
const maxSweepFailures = 5

// reclaimer is the sweeper's state and statements.
type reclaimer struct {
	mu       sync.Mutex
	timer    *time.Timer // the next sweep; nil: none planned
	closed   bool
	failures int
	running  sync.WaitGroup // a planned or running sweep

	due, floor, lockFloor, holds, queue, top, raise, leases, left stmt
}

func (b *Backend) prepareReclaimStatements() {
	p := func(q string) stmt { return prepare(b.d, b.table, q) }
	r := &b.reclaim
	keep := strconv.FormatInt(reclaimAfter.Microseconds(), 10)
	free := `name <> '' AND expires_us < {now} - ` + keep + ` AND NOT EXISTS (SELECT 1 FROM {holds} h WHERE h.name = {table}.name)`
	if b.d.watched != "" {
		free += ` AND NOT (` + b.d.watched + `)`
	}
	ended := `(released_us > 0 AND released_us < {now} - ` + keep + `) OR (released_us = 0 AND expires_us < {now} - ` + keep + `)`
	r.holds = p(`DELETE FROM {holds} WHERE ` + ended)
	// A fair waiter's place ends with its attempts: none come from a
	// waiter gone.
	gone := `expires_us < {now} - ` + keep
	r.queue = p(`DELETE FROM {queue} WHERE ` + gone)
	r.due = p(`SELECT 1 FROM {holds} WHERE ` + ended + ` UNION ALL SELECT 1 FROM {table} WHERE ` + free + ` UNION ALL SELECT 1 FROM {queue} WHERE ` + gone + ` LIMIT 1`)
	r.left = p(`SELECT 1 FROM {table} WHERE name <> '' UNION ALL SELECT 1 FROM {holds} UNION ALL SELECT 1 FROM {queue}`)
	t := b.d.sweep(free)
	r.floor, r.lockFloor, r.top, r.raise, r.leases = p(t.floor), p(t.lockFloor), p(t.top), p(t.raise), p(t.leases)
}

// sweepSoon plans a sweep, unless one is planned or the backend closed.
func (b *Backend) sweepSoon() {
	r := &b.reclaim
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.timer != nil {
		return
	}
	r.failures = 0
	r.running.Add(1)
	r.timer = time.AfterFunc(sweepEvery, b.sweep)
}

// sweep deletes what is due, and plans the next sweep while rows are left.
func (b *Backend) sweep() {
	r := &b.reclaim
	defer r.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), sweepEvery)
	more, err := b.reclaimRows(ctx)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if err != nil {
		r.failures++
	} else {
		r.failures = 0
	}
	if r.closed || !more || r.failures >= maxSweepFailures {
		return
	}
	r.running.Add(1)
	r.timer = time.AfterFunc(sweepEvery, b.sweep)
}

// close stops the sweeper and waits for a running sweep.
func (r *reclaimer) close() {
	r.mu.Lock()
	r.closed = true
	if r.timer != nil && r.timer.Stop() {
		r.running.Done()
	}
	r.timer = nil
	r.mu.Unlock()
	r.running.Wait()
}

// reclaimRows deletes the rows that are due, and reports whether rows are
// left (or whether it could not tell).
func (b *Backend) reclaimRows(ctx context.Context) (more bool, err error) {
	r := &b.reclaim
	// A read first: most sweeps find nothing due, and then take no write
	// lock (SQLite's is the whole file's, MySQL's floor row every
	// acquisition's).
	var one int
	switch err := b.db.QueryRowContext(ctx, r.due.query).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return true, err
	default:
		if err := b.reclaimDue(ctx); err != nil {
			return true, err
		}
	}
	switch err := b.db.QueryRowContext(ctx, r.left.query+" LIMIT 1").Scan(&one); {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return true, err
	}
}

// reclaimDue deletes the rows that are due.
func (b *Backend) reclaimDue(ctx context.Context) error {
	r := &b.reclaim
	if _, err := b.db.ExecContext(ctx, r.queue.query); err != nil {
		return err
	}
	if r.floor.query != "" { // tokens count from the floor row
		return b.reclaimCounted(ctx)
	}
	if _, err := b.db.ExecContext(ctx, r.holds.query); err != nil {
		return err
	}
	_, err := b.db.ExecContext(ctx, r.leases.query)
	return err
}

// reclaimCounted deletes the rows due on MySQL or SQLite, raising the
// floor row above their tokens first, in one transaction.
func (b *Backend) reclaimCounted(ctx context.Context) (err error) {
	r := &b.reclaim
	// Outside the transaction: on MySQL, INSERT IGNORE of an existing row
	// takes a shared lock, and two sweepers upgrading theirs would
	// deadlock.
	if _, err := b.db.ExecContext(ctx, r.floor.query); err != nil {
		return err
	}
	tx, err := b.beginTx(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if r.lockFloor.query != "" { // the floor is raised to the top read
		var floor, top int64
		if err = tx.QueryRowContext(ctx, r.lockFloor.query).Scan(&floor); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, r.holds.query); err != nil {
			return err
		}
		if err = tx.QueryRowContext(ctx, r.top.query).Scan(&top); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, r.raise.query, top); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, r.leases.query, max(floor, top)); err != nil {
			return err
		}
		return tx.Commit()
	}
	// SQLite: the first statement writes, so the transaction holds the
	// database's write lock throughout.
	for _, s := range []stmt{r.holds, r.raise, r.leases} {
		if _, err = tx.ExecContext(ctx, s.query); err != nil {
			return err
		}
	}
	return tx.Commit()
}
