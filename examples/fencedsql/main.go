// Command fencedsql shows a database refusing a write from a lock holder
// whose lease ended while it was paused.
//
// Holder A takes the lock on order 42 and stalls (a long GC pause, a stopped
// VM) past its lease. Holder B then takes the lock and writes. When A
// resumes and writes, its fencing token is lower than B's, and the UPDATE's
// condition makes the database refuse it: B's write stands.
//
// Both holders run in this process on memlock so that the pause can be
// staged; on machines sharing a backend the code is the same.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/memlock"
)

func main() {
	path := flag.String("db", ":memory:", "SQLite database file, created if missing")
	flag.Parse()

	db, err := sql.Open("sqlite", *path)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // every connection to :memory: is a database of its own
	if err := run(context.Background(), db); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, db *sql.DB) error {
	// The token column holds the highest token that wrote the row. Rows
	// exist before fenced updates reach them: an UPDATE that matches no row
	// reads as stale.
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id          INTEGER PRIMARY KEY,
		status      TEXT NOT NULL,
		fence_token INTEGER NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `INSERT OR IGNORE INTO orders (id, status) VALUES (42, 'new')`); err != nil {
		return err
	}

	c := distlock.New(memlock.New(), distlock.WithTTL(200*time.Millisecond))

	// A paused process renews nothing: A's lease runs out after its TTL.
	a, err := c.Mutex("orders:42", distlock.WithoutAutoRefresh()).Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("A: holds orders:42 with token %d, then pauses\n", a.Token())

	b, err := c.Mutex("orders:42").Lock(ctx) // granted once A's lease has ended
	if err != nil {
		return err
	}
	fmt.Printf("B: holds orders:42 with token %d\n", b.Token())
	if err := setStatus(ctx, db, 42, "shipped", b.Token()); err != nil {
		return err
	}
	fmt.Println("B: set status shipped")
	if err := b.Unlock(ctx); err != nil {
		return err
	}

	// A resumes, unaware, and writes.
	err = setStatus(ctx, db, 42, "cancelled", a.Token())
	switch {
	case errors.Is(err, fence.ErrStale):
		fmt.Println("A: set status cancelled: refused:", err)
	case err != nil:
		return err
	default:
		return errors.New("the stale write of holder A was accepted")
	}
	fmt.Println("A: unlock:", a.Unlock(ctx))

	var status string
	var token int64
	if err := db.QueryRowContext(ctx, `SELECT status, fence_token FROM orders WHERE id = 42`).Scan(&status, &token); err != nil {
		return err
	}
	fmt.Printf("order 42: %s, written with token %d\n", status, token)
	return nil
}

// readme-begin

// setStatus writes an order's status only if token is not lower than the
// highest token that wrote the order before: the database checks and writes
// in one statement.
func setStatus(ctx context.Context, db *sql.DB, id int64, status string, token uint64) error {
	return fence.CheckResult(db.ExecContext(ctx,
		`UPDATE orders SET status = ?1, fence_token = ?2 WHERE id = ?3 AND fence_token <= ?2`,
		status, int64(token), id))
}

// readme-end
