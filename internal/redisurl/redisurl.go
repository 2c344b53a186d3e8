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
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, Invalid(u, "address %q: bad port", h)
		}
		addrs = append(addrs, h)
	}
	return addrs, nil
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
