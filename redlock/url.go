package redlock

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redisurl"
)

// The URL scheme registered with distlock.Open:
//
//	redlock://[user:pass@]host:port,host:port,...[/db][?prefix=P&node_timeout=D&max_ttl=D&restart_guard=off|durable]
//
// One host per independent master; user, password and database apply to
// each. node_timeout is a Go duration ("50ms"), see [WithNodeTimeout];
// max_ttl one too ("90s"), see [WithMaxTTL]; restart_guard=off is
// [WithoutRestartGuard], restart_guard=durable [WithDurableServers].
// Clients opened from a URL are set up as [New] recommends, and are closed
// with the distlock.Client.
func init() {
	distlock.Register("redlock", OpenURL)
}

// OpenURL opens a backend from a redlock:// URL (see above).
func OpenURL(_ context.Context, u *url.URL) (driver.Backend, error) {
	if u == nil {
		return nil, fmt.Errorf("%w: nil URL", distlock.ErrInvalidURL)
	}
	clients, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	b := New(clients, opts...)
	if err := b.usable(); err != nil {
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, fmt.Errorf("%w: %s: %w", distlock.ErrInvalidURL, u.Redacted(), err)
	}
	b.ownsRDB = true
	return b, nil
}

var invalid = redisurl.Invalid

func parseURL(u *url.URL) ([]redis.UniversalClient, []Option, error) {
	if !strings.EqualFold(u.Scheme, "redlock") {
		return nil, nil, invalid(u, "scheme %q is not redlock's", u.Scheme)
	}
	var opts []Option
	q := u.Query()
	switch off, err := redisnode.ClockQuery(q); {
	case err != nil:
		return nil, nil, invalid(u, "%v", err)
	case off:
		opts = append(opts, WithoutClockTokens())
	}
	switch maxTTL, off, durable, err := redisnode.GuardQuery(q); {
	case err != nil:
		return nil, nil, invalid(u, "%v", err)
	case off:
		opts = append(opts, WithoutRestartGuard())
	default:
		if maxTTL > 0 {
			opts = append(opts, WithMaxTTL(maxTTL))
		}
		if durable {
			opts = append(opts, WithDurableServers())
		}
	}
	for name, vals := range q {
		if len(vals) != 1 {
			return nil, nil, invalid(u, "option %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "prefix":
			opts = append(opts, WithPrefix(v))
		case "node_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, nil, invalid(u, "node_timeout %q: want a positive duration such as 50ms", v)
			}
			opts = append(opts, WithNodeTimeout(d))
		default:
			return nil, nil, invalid(u, "unknown option %q (known: prefix, node_timeout, max_ttl, restart_guard)", name)
		}
	}
	if u.Host == "" {
		return nil, nil, invalid(u, "no hosts (want redlock://host:port,host:port,...)")
	}
	db, err := redisurl.DB(u, strings.Trim(u.Path, "/"))
	if err != nil {
		return nil, nil, err
	}
	user, pass := redisurl.Credentials(u)
	addrs, err := redisurl.Hosts(u)
	if err != nil {
		return nil, nil, err
	}
	clients := make([]redis.UniversalClient, len(addrs))
	for i, addr := range addrs {
		clients[i] = redis.NewClient(&redis.Options{
			Addr: addr, Username: user, Password: pass, DB: db,
			ContextTimeoutEnabled: true,
			// The backend decides about failed nodes: a retry inside the
			// client would only wait out the node timeout, hiding the
			// node's own error.
			MaxRetries: -1, DialerRetries: 1,
		})
	}
	return clients, opts, nil
}
