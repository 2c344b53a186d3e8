package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// DefaultSessionTimeout is the session timeout of connections opened from
// a URL without session_timeout.
const DefaultSessionTimeout = 10 * time.Second

// URL scheme registered with distlock.Open:
//
//	zk://host:port[,host:port...][/root][?session_timeout=10s&connect_timeout=10s]
//
// Each server is host or host:port (port 2181 if none is given). The
// path is the znode under which locks live (default [DefaultRoot]); a
// path ZooKeeper would refuse (see [WithRoot]) is an error.
// session_timeout is requested from the ensemble (default
// [DefaultSessionTimeout]); the ensemble grants at most its
// maxSessionTimeout (40s by default). The backend learns the timeout the
// ensemble granted from the client, and bounds every lease's deadline by
// the smaller of the two. Open waits up to connect_timeout for a session,
// so an unreachable ensemble fails at once rather than later. The
// connection is closed with the backend.
func init() { distlock.Register("zk", OpenURL) }

func invalid(u *url.URL, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", distlock.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, args...))
}

// OpenURL opens a backend from a zk:// URL (see the package doc).
func OpenURL(ctx context.Context, u *url.URL) (driver.Backend, error) {
	servers, root, session, connect, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	log := &sessionLog{granted: make(chan struct{})}
	conn, events, err := zk.Connect(servers, session, zk.WithLogger(log), zk.WithLogInfo(true))
	if err != nil {
		return nil, fmt.Errorf("zklock: connecting to %s: %w", strings.Join(servers, ","), err)
	}
	timer := time.NewTimer(connect)
	defer timer.Stop()
	hasSession := false
	for {
		select {
		case ev := <-events:
			hasSession = hasSession || ev.State == zk.StateHasSession
		case <-log.granted:
			b := New(conn, session, WithRoot(root))
			b.ownsConn = true
			b.negotiated = &log.timeout
			return b, nil
		case <-timer.C:
			conn.Close()
			if hasSession {
				return nil, errors.New("zklock: the ZooKeeper client did not report the session timeout the ensemble granted")
			}
			return nil, fmt.Errorf("zklock: no session with %s within %v", strings.Join(servers, ","), connect)
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zklock: connecting to %s: %w", strings.Join(servers, ","), ctx.Err())
		}
	}
}

func parseURL(u *url.URL) (servers []string, root string, session, connect time.Duration, err error) {
	if u.Host == "" {
		return nil, "", 0, 0, invalid(u, "no host")
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, "", 0, 0, invalid(u, "empty host in list")
		}
		addr, err := serverAddr(h)
		if err != nil {
			return nil, "", 0, 0, invalid(u, "%v", err)
		}
		servers = append(servers, addr)
	}
	root = strings.TrimSuffix(u.Path, "/")
	if root == "" {
		root = DefaultRoot
	}
	if err := checkRoot(root); err != nil {
		return nil, "", 0, 0, invalid(u, "%v", err)
	}
	session, connect = DefaultSessionTimeout, 10*time.Second
	q := u.Query()
	for name, v := range q {
		var d time.Duration
		switch name {
		case "session_timeout", "connect_timeout":
			if d, err = time.ParseDuration(v[0]); err != nil || d <= 0 {
				return nil, "", 0, 0, invalid(u, "%s=%q is not a positive duration", name, v[0])
			}
		default:
			return nil, "", 0, 0, invalid(u, "unknown option %q", name)
		}
		if name == "session_timeout" {
			session = d
		} else {
			connect = d
		}
	}
	return servers, root, session, connect, nil
}

// serverAddr returns the address of the server h names, host or
// host:port (port 2181 if none is given), or why it names none.
func serverAddr(h string) (string, error) {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		if host, port, err = net.SplitHostPort(h + ":2181"); err != nil {
			return "", fmt.Errorf("server %q is not host or host:port", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("server %q has no host", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("server %q: port %q is not a number from 1 to 65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// sessionLog reads the session timeout the ensemble granted from the
// ZooKeeper client's log line of each new or resumed session (the client
// has no other way to tell it), and drops the other lines (reconnections,
// mostly): what matters reaches the caller as errors.
type sessionLog struct {
	timeout atomic.Int64  // ms; 0 until the first session
	granted chan struct{} // closed at the first session
	once    sync.Once
}

// grantedFormat is the client's (v1.0.4) log line of a session.
const grantedFormat = "authenticated: id=%d, timeout=%d"

func (l *sessionLog) Printf(format string, args ...any) {
	if format != grantedFormat || len(args) != 2 {
		return
	}
	if ms, ok := args[1].(int32); ok && ms > 0 {
		l.timeout.Store(int64(ms))
		l.once.Do(func() { close(l.granted) })
	}
}
