package redislock

import (
	"net/url"
	"testing"

	"github.com/redis/go-redis/v9"
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
