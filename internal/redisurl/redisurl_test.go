package redisurl_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redisurl"
)

// TestErrorsHidePassword: every error about a URL wraps ErrInvalidURL and
// shows the URL without its password.
func TestErrorsHidePassword(t *testing.T) {
	for _, host := range []string{
		"h:1,h2",  // a host without a port
		"h:0",     // a bad port
		"h:1,:2",  // no host name
		"h:70000", // a port out of range
	} {
		u := &url.URL{Scheme: "redis", User: url.UserPassword("u", "s3cret"), Host: host}
		raw := u.Redacted()
		_, err := redisurl.Hosts(u)
		if err == nil {
			t.Errorf("Hosts(%s): nil error", raw)
			continue
		}
		if !errors.Is(err, distlock.ErrInvalidURL) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Hosts(%s): %v; want ErrInvalidURL without the password", raw, err)
		}
	}
	u, _ := url.Parse("redlock://u:s3cret@h:1/x")
	if _, err := redisurl.DB(u, "x"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("DB(x): %v; want an error without the password", err)
	}
	if n, err := redisurl.DB(u, ""); n != 0 || err != nil {
		t.Errorf("DB(\"\") = %d, %v; want 0", n, err)
	}
	if user, pass := redisurl.Credentials(u); user != "u" || pass != "s3cret" {
		t.Errorf("Credentials = %q, %q", user, pass)
	}
}
