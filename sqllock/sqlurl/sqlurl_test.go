package sqlurl_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	_ "github.com/distlock-go/distlock/sqllock/sqlurl"
)

// roundTrip opens rawURL, takes and releases a lock, and closes.
func roundTrip(t *testing.T, rawURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := distlock.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	l, err := c.Mutex("url-test").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	srv := testserver.StartPostgres(t)
	roundTrip(t, srv.URL())
	roundTrip(t, strings.Replace(srv.URL(), "postgres://", "postgresql://", 1)+"&table=locks_b")
}

func TestOpenMariaDB(t *testing.T) {
	srv := testserver.StartMariaDB(t)
	u := url.URL{Scheme: "mysql", User: url.UserPassword(testserver.MariaDBUser, testserver.MariaDBPassword),
		Host: srv.Addr(), Path: "/" + testserver.MariaDBDatabase, RawQuery: "table=locks_m"}
	roundTrip(t, u.String())

	// A wrong password fails at Open, without showing the password.
	u.User = url.UserPassword(testserver.MariaDBUser, "wrong-secret")
	if _, err := distlock.Open(context.Background(), u.String()); err == nil || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("Open with a wrong password: %v; want an error that hides the password", err)
	}
}

func TestOpenSQLite(t *testing.T) {
	roundTrip(t, "sqlite://"+filepath.Join(t.TempDir(), "locks.db"))
}

func TestOpenBadURLs(t *testing.T) {
	for _, raw := range []string{
		"postgres:///nohost",
		"mysql://u:hunter2@h:3306/",
		"mysql://u:hunter2@h:3306/a/b",
		"mysql://u:hunter2@h:3306/db?table=bad;name",
		"mysql://u:hunter2@h:3306/db?table=bad-name",
		"postgres://u:hunter2@h/db?table=a.b.c",
		"sqlite://relative/file.db",
		"sqlite:///",
		"sqlite:///tmp/x.db?cache=shared",
	} {
		_, err := distlock.Open(context.Background(), raw)
		if !errors.Is(err, distlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): error shows the password: %v", raw, err)
		}
	}
}
