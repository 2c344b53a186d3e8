package redisnode_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestFailedSubscribeLeavesNoSubscription: a watch whose subscription
// fails (the server cannot be reached) returns the error and leaves
// nothing behind. go-redis keeps the channel of a failed SUBSCRIBE in its
// set and subscribes it again on every new connection: unless it is taken
// out, the channel stays subscribed, for no watcher, as long as the
// notifier lives.
func TestFailedSubscribeLeavesNoSubscription(t *testing.T) {
	srv := testserver.StartRedis(t)
	var down atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if down.Load() {
				return nil, errors.New("test: the server cannot be reached")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		MaxRetries: -1,
	})
	t.Cleanup(func() { rdb.Close() })
	n := redisnode.NewNotifier(rdb, 2*time.Second)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	down.Store(true)
	if w, err := n.Watch(ctx, "failed"); err == nil {
		w.Close()
		t.Fatal("Watch succeeded with the server unreachable: the fault was not injected")
	}
	down.Store(false)
	w, err := n.Watch(ctx, "later")
	if err != nil {
		t.Fatalf("Watch once the server is back: %v", err)
	}
	defer w.Close()

	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	subs, err := admin.PubSubNumSub(ctx, "failed", "later").Result()
	if err != nil {
		t.Fatal(err)
	}
	if subs["later"] != 1 {
		t.Fatalf("subscribers of the watched channel: %d; want 1", subs["later"])
	}
	if subs["failed"] != 0 {
		t.Errorf("the channel whose subscription failed has %d subscribers; want none", subs["failed"])
	}
}
