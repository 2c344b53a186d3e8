// Package redisurl holds what the Redis backends' URL parsers share: the
// error for a bad URL, with its password redacted, host lists, credentials
// and database numbers.
package redisurl

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock"
)

// Invalid returns an error wrapping distlock.ErrInvalidURL that shows u
// with its password redacted, then the formatted reason. Every error about
// a URL goes through it, so that no password reaches a log.
func Invalid(u *url.URL, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", distlock.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, args...))
}

// Hosts splits u's comma-separated host list, each host:port with a port
// in 1..65535.
func Hosts(u *url.URL) ([]string, error) {
	var addrs []string
	for _, h := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return nil, Invalid(u, "address %q: want host:port", h)
		}
		if !validPort(port) {
			return nil, Invalid(u, "address %q: bad port", h)
		}
		addrs = append(addrs, h)
	}
	return addrs, nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535
}

// Port checks the port of a one-server URL: if given, in 1..65535.
func Port(u *url.URL) error {
	if p := u.Port(); p != "" && !validPort(p) {
		return Invalid(u, "bad port %q: want 1..65535", p)
	}
	return nil
}

// Once reports an error if a query option of u is given more than once:
// which one would win is a guess.
func Once(u *url.URL) error {
	for k, v := range u.Query() {
		if len(v) > 1 {
			return Invalid(u, "option %q given %d times", k, len(v))
		}
	}
	return nil
}

// Credentials returns u's user name and password, empty when absent.
func Credentials(u *url.URL) (user, pass string) {
	if u.User == nil {
		return "", ""
	}
	pass, _ = u.User.Password()
	return u.User.Username(), pass
}

// DB parses a database number (empty: 0).
func DB(u *url.URL, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, Invalid(u, "bad database number %q", s)
	}
	return n, nil
}

// DefaultReplicasTimeout is how long an acquisition or renewal waits for
// its replicas when a URL sets replicas but not replicas_timeout.
const DefaultReplicasTimeout = 100 * time.Millisecond

// Replicas reads the URL options replicas (a count, 0 for none) and
// replicas_timeout (a Go duration, default DefaultReplicasTimeout) and
// removes them from q. n is 0 when replicas is not given.
func Replicas(u *url.URL, q url.Values) (n int, timeout time.Duration, err error) {
	timeout = DefaultReplicasTimeout
	if q.Has("replicas_timeout") {
		v := q.Get("replicas_timeout")
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			return 0, 0, Invalid(u, "replicas_timeout %q: want a positive duration such as 100ms", v)
		}
		if !q.Has("replicas") {
			return 0, 0, Invalid(u, "replicas_timeout without replicas")
		}
		q.Del("replicas_timeout")
	}
	if q.Has("replicas") {
		v := q.Get("replicas")
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			return 0, 0, Invalid(u, "replicas %q: want a number of replicas, 0 or more", v)
		}
		q.Del("replicas")
	}
	return n, timeout, nil
}
