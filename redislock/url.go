package redislock

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redisurl"
)

// URL schemes registered with distlock.Open:
//
//	redis://[user:pass@]host:port[/db][?prefix=P&max_ttl=D&restart_guard=off|durable&clock_tokens=off&replicas=N&replicas_timeout=D&dial_timeout=...]
//	rediss://...                                     (TLS)
//	redis+sentinel://[user:pass@]host:port,host:port/master[/db][?prefix=P&max_ttl=D&restart_guard=off|durable&clock_tokens=off&replicas=N&replicas_timeout=D]
//	redis+cluster://[user:pass@]host:port,host:port[?prefix=P&max_ttl=D&restart_guard=off|durable&clock_tokens=off&replicas=N&replicas_timeout=D]
//
// max_ttl is a Go duration ("90s"), see [WithMaxTTL]; restart_guard=off is
// [WithoutRestartGuard], restart_guard=durable [WithDurableServers];
// clock_tokens=off is [WithoutClockTokens]; replicas
// and replicas_timeout (default 100ms) are [WithReplicas]. Query options other than these and prefix are
// go-redis' own (see redis.ParseURL) for redis and rediss. Clients opened from a URL are set up as the package
// documentation recommends (ContextTimeoutEnabled, DialerRetries 1 and,
// unless the query sets max_retries, MaxRetries -1), and are closed with
// the distlock.Client. Over rediss://, the TLS handshake is bound to the
// call's context, and a server that answers in plain text is reported as
// such within a fraction of a second. Like the other backends' openers,
// OpenURL pings the server (through the sentinels, or one node of a
// cluster) before it returns, so that a URL that cannot reach Redis, or
// whose credentials the server refuses, fails at Open rather than at the
// first lock.
func init() {
	for _, s := range []string{"redis", "rediss", "redis+sentinel", "redis+cluster"} {
		distlock.Register(s, OpenURL)
	}
}

// OpenURL opens a backend from one of the URL forms above, and pings it
// within ctx (and the client's dial and read timeouts).
func OpenURL(ctx context.Context, u *url.URL) (driver.Backend, error) {
	if ctx == nil {
		return nil, fmt.Errorf("redislock: OpenURL: nil context: %w", distlock.ErrInvalidArgument)
	}
	rdb, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redislock: connect to %s: %w", u.Redacted(), err)
	}
	b := New(rdb, opts...)
	b.ownsRDB = true
	return b, nil
}

var invalid = redisurl.Invalid

// parseURL builds a client from u, and the options its query sets.
func parseURL(u *url.URL) (redis.UniversalClient, []Option, error) {
	if err := redisurl.Once(u); err != nil {
		return nil, nil, err
	}
	q := u.Query()
	var opts []Option
	if q.Has("prefix") {
		opts = append(opts, WithPrefix(q.Get("prefix")))
		q.Del("prefix")
	}
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
	switch n, timeout, err := redisurl.Replicas(u, q); {
	case err != nil:
		return nil, nil, err
	case n > 0:
		opts = append(opts, WithReplicas(n, timeout))
	}
	if u.Host == "" {
		return nil, nil, invalid(u, "no host")
	}
	user, pass := redisurl.Credentials(u)
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss":
		if err := redisurl.Port(u); err != nil {
			return nil, nil, err
		}
		v := *u
		v.RawQuery = q.Encode()
		opt, err := redis.ParseURL(v.String())
		if err != nil {
			return nil, nil, invalid(u, "%v", err)
		}
		opt.ContextTimeoutEnabled = true
		if !q.Has("max_retries") {
			opt.MaxRetries = -1
		}
		opt.DialerRetries = 1
		if opt.TLSConfig != nil {
			opt.Dialer = dialTLS(opt.TLSConfig, opt.DialTimeout)
		}
		return redis.NewClient(opt), opts, nil
	case "redis+sentinel":
		if len(q) > 0 {
			return nil, nil, invalid(u, "unknown option(s) %v", q)
		}
		addrs, err := redisurl.Hosts(u)
		if err != nil {
			return nil, nil, err
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if parts[0] == "" || len(parts) > 2 {
			return nil, nil, invalid(u, "want /master-name[/db] after the sentinel addresses")
		}
		db, err := redisurl.DB(u, strings.Join(parts[1:], ""))
		if err != nil {
			return nil, nil, err
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: parts[0], SentinelAddrs: addrs, Username: user, Password: pass,
			DB: db, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		}), opts, nil
	case "redis+cluster":
		if len(q) > 0 {
			return nil, nil, invalid(u, "unknown option(s) %v", q)
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, nil, invalid(u, "a cluster has no database %q", p)
		}
		addrs, err := redisurl.Hosts(u)
		if err != nil {
			return nil, nil, err
		}
		// A cluster client does not retry commands on its nodes by
		// default; its redirections (MOVED, ASK) are not retries.
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Username: user, Password: pass, ContextTimeoutEnabled: true, DialerRetries: 1,
		}), opts, nil
	}
	return nil, nil, invalid(u, "scheme %q is not redislock's", u.Scheme)
}
