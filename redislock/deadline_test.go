package redislock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// refusedAddr returns an address on which nothing listens.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// recommended opens a client the two documented ways: from a URL, and with
// the redis.Options of the package documentation and the README.
var recommended = map[string]func(t *testing.T, addr string, opts ...distlock.Option) *distlock.Client{
	"URL": func(t *testing.T, addr string, opts ...distlock.Option) *distlock.Client {
		c, err := distlock.Open(context.Background(), "redis://"+addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	},
	"Options": func(t *testing.T, addr string, opts ...distlock.Option) *distlock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { rdb.Close() })
		return distlock.New(newBackend(t, rdb), opts...)
	},
}

// bounded runs f under a ctx of timeout and checks that it returns within
// the deadline plus slack, with an error that names the cause.
func bounded(t *testing.T, name string, timeout time.Duration, cause string, f func(ctx context.Context) error) {
	t.Helper()
	const slack = time.Second // generous: the machine may be loaded
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	t.Logf("%s: %v, after %v", name, err, took.Round(time.Millisecond))
	if err == nil {
		t.Errorf("%s: no error", name)
		return
	}
	if took > timeout+slack {
		t.Errorf("%s took %v with a %v deadline: %v", name, took, timeout, err)
	}
	if !strings.Contains(err.Error(), cause) {
		t.Errorf("%s: %v; want the cause (%q) named", name, err, cause)
	}
}

// TestDeadlinesRefused: with nothing listening, every call fails within its
// deadline and says "connection refused", not only that the deadline passed.
// Each failed release is repeated for the release timeout (distlock's, 5s
// by default; set short here, as in TestDeadlinesPaused): what is checked
// is that each call to Redis fails at once.
func TestDeadlinesRefused(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for name, open := range recommended {
		t.Run(name, func(t *testing.T) {
			if name == "URL" { // Open pings the server: it is Open that fails
				bounded(t, "Open", timeout, "connection refused", func(ctx context.Context) error {
					c, err := distlock.Open(ctx, "redis://"+refusedAddr(t))
					if err == nil {
						c.Close()
					}
					return err
				})
				return
			}
			c := open(t, refusedAddr(t), distlock.WithReleaseTimeout(100*time.Millisecond))
			m := c.Mutex(t.Name())
			bounded(t, "TryLock", timeout, "connection refused", func(ctx context.Context) error {
				_, err := m.TryLock(ctx)
				return err
			})
			bounded(t, "Lock", timeout, "connection refused", func(ctx context.Context) error {
				_, err := m.Lock(ctx)
				if err != nil && (!errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded)) {
					t.Errorf("Lock: %v; want ErrNotObtained and the deadline wrapped", err)
				}
				return err
			})

			// A lock held when its server died.
			srv := testserver.StartRedis(t)
			c = open(t, srv.Addr(), distlock.WithTTL(time.Minute), distlock.WithReleaseTimeout(100*time.Millisecond))
			l, err := c.Mutex(t.Name()).TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			srv.Kill(t)
			bounded(t, "Refresh", timeout, "connection refused", func(ctx context.Context) error {
				return l.Refresh(ctx, time.Minute)
			})
			bounded(t, "Unlock", timeout, "connection refused", func(ctx context.Context) error {
				return l.Unlock(ctx)
			})
		})
	}
}

// TestDeadlinesPaused: a server that accepts connections but answers
// nothing holds no call past its deadline, and the error says the server
// did not answer in time ("i/o timeout"), not only that the deadline passed.
//
// TryLock and Lock end with a release of what their unanswered attempt may
// have taken, bounded by the release timeout (distlock's, 5s by default),
// which is set short here: this test is about the calls to Redis.
func TestDeadlinesPaused(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for name, open := range recommended {
		t.Run(name, func(t *testing.T) {
			srv := testserver.StartRedis(t)
			c := open(t, srv.Addr(), distlock.WithTTL(time.Minute), distlock.WithReleaseTimeout(100*time.Millisecond))
			l, err := c.Mutex(t.Name() + "-held").TryLock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			srv.Pause(t)
			defer srv.Resume(t)
			m := c.Mutex(t.Name())
			bounded(t, "TryLock", timeout, "timeout", func(ctx context.Context) error {
				_, err := m.TryLock(ctx)
				return err
			})
			bounded(t, "Lock", timeout, "timeout", func(ctx context.Context) error {
				_, err := m.Lock(ctx)
				return err
			})
			bounded(t, "Refresh", timeout, "timeout", func(ctx context.Context) error {
				return l.Refresh(ctx, time.Minute)
			})
			bounded(t, "Unlock", timeout, "timeout", func(ctx context.Context) error {
				return l.Unlock(ctx)
			})
		})
	}
}

// TestMisconfiguredURL: a wrong password, or TLS to a plain-text server,
// fails at once with an error that says so, instead of retrying (or
// waiting for a TLS handshake) until the deadline, or repeating the release
// of an attempt that took nothing for the release timeout.
func TestMisconfiguredURL(t *testing.T) {
	srv := testserver.StartRedis(t)
	const timeout = 3 * time.Second
	quick := func(t *testing.T, url, cause string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		// Open pings the server: it is Open that fails.
		c, err := distlock.Open(ctx, url)
		if err == nil {
			defer c.Close()
			_, err = c.Mutex(t.Name()).TryLock(ctx)
			t.Errorf("Open(%s) succeeded; want it to fail", url)
		}
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), cause) {
			t.Errorf("Open via %s: %v; want an error naming %q", url, err, cause)
		}
		if took > timeout/2 {
			t.Errorf("Open via %s took %v of its %v; want a prompt failure", url, took, timeout)
		}
	}
	t.Run("TLS to plain text", func(t *testing.T) {
		quick(t, "rediss://"+srv.Addr(), "plain text")
	})
	t.Run("wrong password", func(t *testing.T) {
		auth := testserver.StartRedis(t)
		if _, err := auth.Do(t, "CONFIG", "SET", "requirepass", "right"); err != nil {
			t.Fatal(err)
		}
		quick(t, "redis://:wrong@"+auth.Addr(), "WRONGPASS")
	})
	t.Run("TLS to plain text with a password", func(t *testing.T) {
		auth := testserver.StartRedis(t)
		if _, err := auth.Do(t, "CONFIG", "SET", "requirepass", "right"); err != nil {
			t.Fatal(err)
		}
		quick(t, "rediss://:right@"+auth.Addr(), "plain text")
	})
}

// TestWatchPaused: a subscription that a paused server never confirms
// ends at the deadline with an error that says the server did not reply.
// The subscription connection is open before the pause, as it is for a
// client that has waited before.
func TestWatchPaused(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := newBackend(t, newClient(t, srv.Addr()))
	w, err := b.Watch(context.Background(), t.Name()+"-before", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	srv.Pause(t)
	defer srv.Resume(t)
	bounded(t, "Watch", 500*time.Millisecond, "no reply", func(ctx context.Context) error {
		w, err := b.Watch(ctx, t.Name(), "")
		if err == nil {
			w.Close()
		}
		return err
	})
}
