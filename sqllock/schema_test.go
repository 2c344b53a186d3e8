package sqllock_test

import (
	"database/sql"
	"os/exec"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/sqllock"
)

func TestSchemaAndTableNames(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite} {
		ddl, err := sqllock.Schema(d, "app.locks_1")
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS app.locks_1 (") {
			t.Errorf("Schema(%s): %q, %v", d, ddl, err)
		}
	}
	if _, err := sqllock.Schema("oracle", "locks"); err == nil {
		t.Errorf("Schema of an unknown dialect: no error")
	}
	for _, bad := range []string{"", "1locks", "locks; DROP TABLE x", "a.b.c", "lo-cks", `"locks"`, strings.Repeat("a", 64)} {
		if _, err := sqllock.Schema(sqllock.Postgres, bad); err == nil {
			t.Errorf("Schema with table %q: no error", bad)
		}
		if _, err := sqllock.New(sqliteFile(t).open(t), sqllock.WithTable(bad)); err == nil {
			t.Errorf("New with table %q: no error", bad)
		}
	}
}

func TestDetectDialect(t *testing.T) {
	for drv, want := range map[string]sqllock.Dialect{"pgx": sqllock.Postgres, "mysql": sqllock.MySQL, "sqlite": sqllock.SQLite} {
		db, err := sql.Open(drv, "u@tcp(127.0.0.1:1)/db") // never connected
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sqllock.DetectDialect(db); got != want || err != nil {
			t.Errorf("DetectDialect(%s) = %q, %v; want %q", drv, got, err, want)
		}
		db.Close()
	}
	if _, err := sqllock.New(nil); err == nil {
		t.Errorf("New(nil): no error")
	}
}

// TestNoDriverDependency: package sqllock builds on database/sql alone;
// the drivers come with sqlurl, the CLI and tests only.
func TestNoDriverDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, drv := range []string{"jackc/pgx", "go-sql-driver", "modernc.org/sqlite", "redis/go-redis"} {
			if strings.Contains(dep, drv) {
				t.Errorf("sqllock depends on %s", dep)
			}
		}
	}
}
