package sqlurl

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"
)

// TestSQLiteDurability: the file a sqlite:// URL opens is in WAL mode with
// synchronous FULL, so that a commit (and the token it issued) survives a
// power loss, with a busy timeout.
func TestSQLiteDurability(t *testing.T) {
	u := &url.URL{Scheme: "sqlite", Path: filepath.Join(t.TempDir(), "locks.db")}
	driverName, dsn, _, _, err := parse(u)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "10000"} {
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s; want %s", pragma, got, want)
		}
	}
}
