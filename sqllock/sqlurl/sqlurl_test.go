package sqlurl_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/sqlurl"
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
	roundTrip(t, srv.URL()+"&lock=connection")
}

func TestOpenMariaDB(t *testing.T) {
	srv := testserver.StartMariaDB(t)
	u := url.URL{Scheme: "mysql", User: url.UserPassword(testserver.MariaDBUser, testserver.MariaDBPassword),
		Host: srv.Addr(), Path: "/" + testserver.MariaDBDatabase, RawQuery: "table=locks_m"}
	roundTrip(t, u.String())
	u.RawQuery += "&lock=connection"
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

// TestOpenURL: the opener has the name every backend's has, and the
// former name still opens the same backend.
func TestOpenURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u, err := url.Parse("sqlite://" + filepath.Join(t.TempDir(), "locks.db") + "?table=opened")
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(context.Context, *url.URL) (driver.Backend, error){"OpenURL": sqlurl.OpenURL, "Open": sqlurl.Open} {
		b, err := open(ctx, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sb, ok := b.(*sqllock.Backend); !ok || sb.Dialect() != sqllock.SQLite || sb.Table() != "opened" {
			t.Errorf("%s: %T %+v, want a *sqllock.Backend on SQLite's table opened", name, b, b)
		}
		if err := b.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
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
		"sqlite:///tmp/x.db?lock=connection",
		"postgres://u:hunter2@h/db?lock=session",
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

// silentAddr returns a loopback address whose connection attempts go
// unanswered, as a host cut off by a firewall: a listener with a backlog
// of one that never accepts, its queue filled, so that the kernel drops
// the SYNs of further connections.
func silentAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatalf("listen: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // the queue is full: this attempt went unanswered
		}
		t.Cleanup(func() { c.Close() })
		if i == 16 {
			t.Fatalf("%d connections to a listener with a backlog of one: the kernel does not drop SYNs here", i+1)
		}
	}
}

// TestOpenMySQLUnreachable: a mysql:// URL whose host does not answer
// fails within the default dial timeout, not after the kernel's minutes
// of SYN retries, even with a context without a deadline; an unused port
// fails at once; the URL's own timeout option is kept.
func TestOpenMySQLUnreachable(t *testing.T) {
	open := func(host, query string, wait time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		c, err := distlock.Open(ctx, "mysql://u:hunter2@"+host+"/db"+query)
		if err == nil {
			c.Close()
		}
		return time.Since(start), err
	}
	silent := silentAddr(t)
	if took, err := open(silent, "", 30*time.Second); err == nil || took > 10*time.Second {
		t.Errorf("Open of a host that does not answer: %v after %v; want an error within the default 5s dial timeout", err, took)
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
	if took, err := open(silent, "?timeout=500ms", 30*time.Second); err == nil || took > 3*time.Second {
		t.Errorf("Open with timeout=500ms of a host that does not answer: %v after %v", err, took)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unused := l.Addr().String()
	l.Close()
	if took, err := open(unused, "", 30*time.Second); err == nil || took > 2*time.Second {
		t.Errorf("Open of an unused loopback port: %v after %v; want an error at once", err, took)
	}
}

// TestOpenPostgresUnreachable: a postgres:// URL whose host does not
// answer fails within the default connect timeout, not when the context
// (or the kernel's retries) end; the URL's own connect_timeout is kept.
func TestOpenPostgresUnreachable(t *testing.T) {
	t.Parallel()
	open := func(query string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		c, err := distlock.Open(ctx, "postgres://u:hunter2@"+silentAddr(t)+"/db"+query)
		if err == nil {
			c.Close()
		}
		return time.Since(start), err
	}
	if took, err := open(""); err == nil || took > 10*time.Second {
		t.Errorf("Open of a host that does not answer: %v after %v; want an error within the default 5s connect timeout", err, took)
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
	if took, err := open("?connect_timeout=1"); err == nil || took > 3*time.Second {
		t.Errorf("Open with connect_timeout=1 of a host that does not answer: %v after %v", err, took)
	}
}
