package etcdlock

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// The URL scheme registered with distlock.Open:
//
//	etcd://[user:pass@]host:port[,host:port...][?prefix=P&dial_timeout=D]
//
// prefix is [WithPrefix]; dial_timeout (a Go duration, default 5s) bounds
// the first connection: an unreachable cluster fails Open after it. The
// client is plain-text gRPC, silent (no log output), and is closed with
// the distlock.Client.
func init() {
	distlock.Register("etcd", OpenURL)
}

// OpenURL opens a backend from a URL of the form above.
func OpenURL(ctx context.Context, u *url.URL) (driver.Backend, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	// A read proves that the cluster answers, within the dial timeout
	// and ctx.
	sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(sctx, "distlock-ping", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcdlock: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	b := New(cli, opts...)
	b.ownClient = true
	return b, nil
}

func invalid(u *url.URL, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", distlock.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, args...))
}

// parseURL returns the client configuration u describes and the options
// its query sets.
func parseURL(u *url.URL) (clientv3.Config, []Option, error) {
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if !strings.EqualFold(u.Scheme, "etcd") {
		return cfg, nil, invalid(u, "scheme %q; want etcd", u.Scheme)
	}
	if u.Host == "" {
		return cfg, nil, invalid(u, "no host")
	}
	if u.Path != "" && u.Path != "/" {
		return cfg, nil, invalid(u, "a path (%q): set the key prefix with ?prefix=", u.Path)
	}
	for _, h := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return cfg, nil, invalid(u, "host %q: want host:port", h)
		}
		cfg.Endpoints = append(cfg.Endpoints, "http://"+h)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	var opts []Option
	for name, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "prefix":
			opts = append(opts, WithPrefix(v))
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return cfg, nil, invalid(u, "dial_timeout %q: want a positive duration", v)
			}
			cfg.DialTimeout = d
		default:
			return cfg, nil, invalid(u, "unknown option %q", name)
		}
	}
	return cfg, opts, nil
}
