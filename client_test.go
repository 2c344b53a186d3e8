package distlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/memlock"
	"github.com/distlock-go/distlock/redislock"
)

// TestClientDeclareFresh: a brand-new Redis server's restart guard holds
// new keys back until the client declares the server fresh; a backend
// without a guard has nothing to declare.
func TestClientDeclareFresh(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.AsRestarted()) // as an operator starts one: unmarked
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	c := distlock.New(redislock.New(rdb))
	ctx := context.Background()
	if l, err := c.Mutex("fresh").TryLock(ctx); !errors.Is(err, distlock.ErrRestartGuard) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("TryLock on a server started a moment ago: %v; want ErrRestartGuard", err)
	}
	if err := c.DeclareFresh(ctx); err != nil {
		t.Fatalf("DeclareFresh: %v", err)
	}
	l, err := c.Mutex("fresh").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after DeclareFresh: %v", err)
	}
	_ = l.Unlock(ctx)

	if err := distlock.New(memlock.New()).DeclareFresh(ctx); err != nil {
		t.Errorf("DeclareFresh on memlock: %v; want nil, nothing to declare", err)
	}
	if err := (*distlock.Client)(nil).DeclareFresh(ctx); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("DeclareFresh on a nil client: %v", err)
	}
}
