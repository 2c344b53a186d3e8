package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redisurl"
	"github.com/distlock-go/distlock/internal/torture"
	"github.com/distlock-go/distlock/redislock"
)

// openRouted opens, for a torture worker, the redis+sentinel backend of
// rawURL with the client redislock.OpenURL would make, except that every
// address it dials, sentinel or master, goes through the worker's own
// proxy (routes, the value of torture.RoutesEnv): a Sentinel hands out the
// master's real address, which no rewriting of the URL could cover. close
// closes the backend and its client.
func (c *cli) openRouted(rawURL, routes string) (b *backend, close func(), code int) {
	m, err := torture.ParseRoutes(routes)
	if err != nil {
		return nil, nil, c.fail(exitSoftware, tortureWorkerCommand, "%v", err)
	}
	rdb, opts, err := sentinelClient(rawURL, m)
	if err != nil {
		return nil, nil, c.usageError(tortureWorkerCommand, "%s", errText(err))
	}
	rb := redislock.New(rdb, opts...)
	b = &backend{Backend: rb, client: distlock.New(rb), url: rawURL}
	return b, func() {
		_, _ = bounded(context.Background(), time.Now().Add(cleanupTimeout), func(context.Context) (struct{}, error) {
			return struct{}{}, errors.Join(rb.Close(), rdb.Close())
		}, nil)
	}, exitOK
}

// sentinelClient returns the failover client of the redis+sentinel URL
// rawURL, set up as redislock's URLs set it up, dialling through routes,
// and the redislock options of its query.
func sentinelClient(rawURL string, routes map[string]string) (*redis.Client, []redislock.Option, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", distlock.ErrInvalidURL, err)
	}
	if !strings.EqualFold(u.Scheme, "redis+sentinel") {
		return nil, nil, redisurl.Invalid(u, "routes are for redis+sentinel URLs only")
	}
	q := u.Query()
	var opts []redislock.Option
	if q.Has("prefix") {
		opts = append(opts, redislock.WithPrefix(q.Get("prefix")))
		q.Del("prefix")
	}
	off, err := redisnode.ClockQuery(q)
	if err != nil {
		return nil, nil, redisurl.Invalid(u, "%v", err)
	}
	if off {
		opts = append(opts, redislock.WithoutClockTokens())
	}
	maxTTL, off, durable, err := redisnode.GuardQuery(q)
	switch {
	case err != nil:
		return nil, nil, redisurl.Invalid(u, "%v", err)
	case off:
		opts = append(opts, redislock.WithoutRestartGuard())
	default:
		if maxTTL > 0 {
			opts = append(opts, redislock.WithMaxTTL(maxTTL))
		}
		if durable {
			opts = append(opts, redislock.WithDurableServers())
		}
	}
	n, timeout, err := redisurl.Replicas(u, q)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		opts = append(opts, redislock.WithReplicas(n, timeout))
	}
	if len(q) > 0 {
		return nil, nil, redisurl.Invalid(u, "unknown option(s) %v", q)
	}
	addrs, err := redisurl.Hosts(u)
	if err != nil {
		return nil, nil, err
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, nil, redisurl.Invalid(u, "want /master-name[/db] after the sentinel addresses")
	}
	db, err := redisurl.DB(u, strings.Join(parts[1:], ""))
	if err != nil {
		return nil, nil, err
	}
	user, pass := redisurl.Credentials(u)
	var d net.Dialer
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: parts[0], SentinelAddrs: addrs, Username: user, Password: pass,
		DB: db, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			to, ok := routes[addr]
			if !ok {
				// A server the harness did not know of: reaching it
				// directly would escape the cut faults.
				return nil, fmt.Errorf("torture worker: no route to %s", addr)
			}
			return d.DialContext(ctx, network, to)
		},
	}), opts, nil
}
