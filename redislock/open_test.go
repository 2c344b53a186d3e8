package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/launch"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestOpenPings: Open fails at once, naming the URL without its password,
// when the server cannot be reached or refuses the credentials, as the
// other backends' openers do; a URL that reaches Redis opens.
func TestOpenPings(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the harness's own cleanup, which has no password
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "s3cret"})
		defer rdb.Close()
		_ = rdb.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"nothing listening", fmt.Sprintf("redis://127.0.0.1:%d", port), fmt.Sprintf("connect to redis://127.0.0.1:%d", port)},
		{"wrong password", "redis://:wrongpass@" + srv.Addr(), "connect to redis://:xxxxx@" + srv.Addr()},
		{"no password", "redis://" + srv.Addr(), "connect to redis://" + srv.Addr()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := distlock.Open(ctx, tc.url)
			if err == nil {
				c.Close()
				t.Fatalf("Open(%q) succeeded; want a connection error", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "wrongpass") {
				t.Errorf("Open(%q): %v; want it to say %q and hide the password", tc.url, err, tc.want)
			}
			if ctx.Err() != nil {
				t.Errorf("Open(%q) returned only when its context ended", tc.url)
			}
		})
	}
	c, err := distlock.Open(context.Background(), "redis://:s3cret@"+srv.Addr())
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	u, err := url.Parse("redis://:s3cret@" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 testing that a nil context is rejected
	if _, err := redislock.OpenURL(nil, u); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("OpenURL(nil ctx): %v; want ErrInvalidArgument", err)
	}
}
