package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/sqllock"
)

// Example takes a lock in a table of an SQLite file, which needs no
// server; on PostgreSQL or MySQL only the driver and sql.Open change. The
// backend finds the dialect from the driver and creates its table on first
// use.
func Example() {
	dir, err := os.MkdirTemp("", "sqllock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	backend, err := sqllock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	c := distlock.New(backend, distlock.WithTTL(10*time.Second))

	ctx := context.Background()
	l, err := c.Mutex("reports").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	first := l.Token()
	if _, err := c.Mutex("reports").TryLock(ctx); errors.Is(err, distlock.ErrNotObtained) {
		fmt.Println("held: another TryLock is refused")
	}
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	next, err := c.Mutex("reports").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(context.Background())
	fmt.Println("the next holder's fencing token is greater:", next.Token() > first)
	// Output:
	// held: another TryLock is refused
	// the next holder's fencing token is greater: true
}
