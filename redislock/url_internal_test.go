package redislock

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
)

// TestURLClientSettings: clients opened from a URL get the recommended
// settings, unless the URL's query sets them.
func TestURLClientSettings(t *testing.T) {
	for _, tc := range []struct {
		url                   string
		maxRetries, dialTries int
		tls                   bool
	}{
		{"redis://h:1", 0, 1, false}, // go-redis stores MaxRetries -1 as 0
		{"rediss://h:1", 0, 1, true},
		{"redis://h:1?max_retries=2", 2, 1, false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		rdb, _, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		opt := rdb.(*redis.Client).Options()
		if !opt.ContextTimeoutEnabled || opt.MaxRetries != tc.maxRetries || opt.DialerRetries != tc.dialTries {
			t.Errorf("%s: ContextTimeoutEnabled %v, MaxRetries %d, DialerRetries %d; want true, %d, %d",
				tc.url, opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries, tc.maxRetries, tc.dialTries)
		}
		if tc.tls && opt.TLSConfig == nil {
			t.Errorf("%s: no TLS", tc.url)
		}
		_ = rdb.Close()
	}
	for _, raw := range []string{"redis+sentinel://h:1,h:2/m", "redis+cluster://h:1,h:2"} {
		u, _ := url.Parse(raw)
		rdb, _, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		_ = rdb.Close()
	}
}

// TestURLReplicas: replicas and replicas_timeout set WithReplicas on every
// scheme, and bad values are refused.
func TestURLReplicas(t *testing.T) {
	for _, tc := range []struct {
		url     string
		n       int
		timeout time.Duration
	}{
		{"redis://h:1?replicas=1", 1, 100 * time.Millisecond},
		{"redis://h:1?replicas=2&replicas_timeout=250ms", 2, 250 * time.Millisecond},
		{"redis+sentinel://h:1,h:2/m?replicas=1&replicas_timeout=1s", 1, time.Second},
		{"redis+cluster://h:1?replicas=1", 1, 100 * time.Millisecond},
		{"redis://h:1?replicas=0", 0, 0},
		{"redis://h:1", 0, 0},
	} {
		u, _ := url.Parse(tc.url)
		rdb, opts, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		b := New(rdb, opts...)
		if b.replicas != tc.n || b.waitFor != tc.timeout {
			t.Errorf("%s: replicas %d, timeout %v; want %d, %v", tc.url, b.replicas, b.waitFor, tc.n, tc.timeout)
		}
		_ = rdb.Close()
	}
	for _, raw := range []string{
		"redis://h:1?replicas=-1",
		"redis://h:1?replicas=x",
		"redis://h:1?replicas=1&replicas_timeout=0s",
		"redis://h:1?replicas_timeout=1s",
		"redis+sentinel://h:1/m?replicas=one",
	} {
		u, _ := url.Parse(raw)
		if _, _, err := parseURL(u); !errors.Is(err, distlock.ErrInvalidURL) {
			t.Errorf("%s: %v, want ErrInvalidURL", raw, err)
		}
	}
}
