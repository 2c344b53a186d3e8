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
	rdb, down := unreachable(t, srv.Addr())
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

// TestMarkAcrossBreak: a mark taken before the subscription connection
// broke no longer holds: a watch made while the connection is down, or
// once it is back, reports that a release may have been missed, since
// one published meanwhile went to no subscriber.
func TestMarkAcrossBreak(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb, down := unreachable(t, srv.Addr())
	n := redisnode.NewNotifier(rdb, 2*time.Second)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()

	live, err := n.Watch(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	mark := n.Mark("ch")
	if mark == 0 {
		t.Fatal("no mark for a live subscription")
	}
	w, missed, err := n.WatchSince(ctx, "ch", "", mark)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if missed {
		t.Fatal("a watch on a live channel that heard nothing since the mark reports a missed release")
	}

	down.Store(true)
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for n.Mark("ch") != 0 { // the notifier has seen the break
		if ctx.Err() != nil {
			t.Fatal("the notifier did not see its connection break")
		}
		time.Sleep(10 * time.Millisecond)
	}
	w, missed, err = n.WatchSince(ctx, "ch", "", mark)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !missed {
		t.Error("a watch made while the connection is down reports no missed release")
	}

	down.Store(false)
	select {
	case <-live.C(): // back: every watcher is woken
	case <-ctx.Done():
		t.Fatal("the notifier did not come back")
	}
	w, missed, err = n.WatchSince(ctx, "ch", "", mark)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !missed {
		t.Error("a watch made after the connection came back, with a mark from before the break, reports no missed release")
	}
	if m := n.Mark("ch"); m == 0 || m == mark {
		t.Errorf("mark once back: %d; want a new one (before the break: %d)", m, mark)
	}
}

// unreachable returns a client of addr, closed at cleanup, whose new
// connections fail while down is set.
func unreachable(t *testing.T, addr string) (*redis.Client, *atomic.Bool) {
	down := new(atomic.Bool)
	rdb := redis.NewClient(&redis.Options{
		Addr: addr,
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
	return rdb, down
}
