package main_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestFencedSQL runs the stale-holder story against an SQLite file and
// then reads the row itself: the later holder's write must stand.
func TestFencedSQL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.db")
	stdout, _ := exampletest.Run(t, 0, nil, "fencedsql", "-db", path)
	exampletest.WantLines(t, stdout,
		"A: holds orders:42 with token 1, then pauses",
		"B: holds orders:42 with token 2",
		"B: set status shipped",
		"A: set status cancelled: refused: fence: stale fencing token: the fenced update matched no row (a higher token is stored, or the row does not exist)",
		"A: unlock: distlock: lock lost: not renewed before its deadline",
		"order 42: shipped, written with token 2",
	)

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status string
	var token int64
	if err := db.QueryRow(`SELECT status, fence_token FROM orders WHERE id = 42`).Scan(&status, &token); err != nil {
		t.Fatal(err)
	}
	if status != "shipped" || token != 2 {
		t.Fatalf("row 42 = %q, token %d; want shipped, token 2", status, token)
	}
}

// TestFencedSQLBadPath checks that an unusable database path is an error.
func TestFencedSQLBadPath(t *testing.T) {
	t.Parallel()
	_, stderr := exampletest.Run(t, 1, nil, "fencedsql", "-db", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"))
	if !strings.Contains(stderr, "unable to open database file") {
		t.Fatalf("stderr %q does not say the database cannot be opened", stderr)
	}
}
