package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestPlainClient: a client made with go-redis' defaults takes and
// releases locks correctly, and New warns, once, of what its options cost
// (calls that outlive their context) and names the options that avoid it;
// a client set up as the package doc says gets no warning.
func TestPlainClient(t *testing.T) {
	srv := testserver.StartRedis(t)
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	plain := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { plain.Close() })
	b := redislock.New(plain)
	t.Cleanup(func() { b.Close() })
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 {
		t.Fatalf("New with a plain client logged %d warnings; want one:\n%s", n, logged.String())
	}
	for _, want := range []string{"ContextTimeoutEnabled: true", "MaxRetries: -1", "DialerRetries: 1", "ContextTimeoutEnabled is off", "MaxRetries is 3", "DialerRetries is 5"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the warning does not say %q:\n%s", want, logged.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := distlock.New(b)
	l, err := c.Mutex("plain").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := c.Mutex("plain").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		if l2 != nil {
			_ = l2.Unlock(ctx)
		}
		t.Errorf("second TryLock through a plain client: %v; want ErrNotObtained", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	l, err = c.Mutex("plain").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = l.Unlock(ctx)

	logged.Reset()
	set := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { set.Close() })
	b2 := redislock.New(set)
	t.Cleanup(func() { b2.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true, DialerRetries: 1})
	t.Cleanup(func() { cluster.Close() })
	b3 := redislock.New(cluster)
	t.Cleanup(func() { b3.Close() })
	if logged.Len() != 0 {
		t.Errorf("New with the recommended options logged:\n%s", logged.String())
	}
}
