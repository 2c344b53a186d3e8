package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestLostReleaseReply: a release reaches the server and is applied, but
// its reply is lost (the connection closes: EOF). The call is sent again —
// by go-redis' own retries, or by the backend when the client has none —
// and the repeat must report the release it made, not a lost lease.
func TestLostReleaseReply(t *testing.T) {
	srv := testserver.StartRedis(t)
	proxy := testserver.StartProxy(t, srv.Addr())
	// Loaded up front: the reply to drop must be the script's, not NOSCRIPT.
	if err := redisnode.LoadScripts(context.Background(), newClient(t, srv.Addr())); err != nil {
		t.Fatal(err)
	}
	clients := map[string]func(t *testing.T) *distlock.Client{
		// go-redis' defaults: it retries a command on EOF.
		"client retries": func(t *testing.T) *distlock.Client {
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			return distlock.New(newBackend(t, rdb), distlock.WithTTL(time.Minute))
		},
		// The client a URL opens (the recommended settings).
		"URL": func(t *testing.T) *distlock.Client {
			c, err := distlock.Open(context.Background(), "redis://"+proxy.Addr(), distlock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
	}
	kinds := []struct {
		name string
		take func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error)
	}{
		{"mutex", func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error) {
			return c.Mutex(key).TryLock(ctx)
		}},
		{"fair mutex", func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error) {
			return c.Mutex(key, distlock.WithFairness()).TryLock(ctx)
		}},
		{"permit", func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error) {
			return c.Semaphore(key, 1).TryAcquire(ctx)
		}},
		{"reader", func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error) {
			return c.RWMutex(key).TryRLock(ctx)
		}},
		{"writer", func(c *distlock.Client, ctx context.Context, key string) (*distlock.Lock, error) {
			return c.RWMutex(key).TryLock(ctx)
		}},
	}
	for cname, newClient := range clients {
		for _, kind := range kinds {
			t.Run(cname+"/"+kind.name, func(t *testing.T) {
				c := newClient(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				key := fmt.Sprintf("%s-%s-%s", t.Name(), cname, kind.name)
				l, err := kind.take(c, ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				// Only a release names the release channel.
				dropped := proxy.DropReply(redistest.Keys(redislock.DefaultPrefix, key).Channel)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock whose reply was lost: %v; want nil (it released)", err)
				}
				select {
				case <-dropped:
				default:
					t.Fatal("the release's reply was not dropped: the fault was not injected")
				}
				again, err := kind.take(c, ctx, key)
				if err != nil {
					t.Fatalf("taking it again after the release: %v; want it free", err)
				}
				if err := again.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			})
		}
	}
}

// TestWaiterWakesAtHolderExpiry: a holder that vanished (no release, so no
// notification) is outlived by a waiter that wakes when its lease ends.
// The waiter's last refused attempt often lands in the lease's last
// millisecond (PTTL 0); that must still be a hint to retry at once, not an
// unknown wait that falls back to the safety poll (10s here). Over many
// rounds some attempts land there.
func TestWaiterWakesAtHolderExpiry(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithSafetyPoll(10*time.Second))
	const rounds, ttl = 40, 20 * time.Millisecond
	for round := range rounds {
		key := fmt.Sprintf("%s-%d", t.Name(), round)
		// On a loaded machine the holder's reply may come after its 20ms
		// lease ended (TryLock then fails and holds nothing): try again.
		holder := c.Mutex(key, distlock.WithTTL(ttl), distlock.WithoutAutoRefresh())
		for tries := 1; ; tries++ {
			_, err := holder.TryLock(context.Background())
			if err == nil {
				break
			}
			if tries == 50 {
				t.Fatalf("round %d: holder: %v", round, err)
			}
			time.Sleep(ttl) // what the failed attempt took has lapsed
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		l, err := c.Mutex(key).Lock(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: waiter after a %v lease: %v after %v; want the lock soon after the lease ended",
				round, ttl, err, time.Since(start))
		}
		_ = l.Unlock(context.Background())
	}
}

// TestLostReplyResent: on a client that does not retry (the recommended
// settings), a call whose connection breaks after the request was sent is
// sent once more by the backend, and every kind of call reports what the
// first sending did.
func TestLostReplyResent(t *testing.T) {
	srv := testserver.StartRedis(t)
	proxy := testserver.StartProxy(t, srv.Addr())
	if err := redisnode.LoadScripts(context.Background(), newClient(t, srv.Addr())); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := t.Name()
	lost := func(what string, call func() error) {
		t.Helper()
		dropped := proxy.DropReply(lockKey(key))
		if err := call(); err != nil {
			t.Errorf("%s whose reply was lost: %v; want what the first sending did", what, err)
		}
		select {
		case <-dropped:
		default:
			t.Fatalf("%s: the reply was not dropped: the fault was not injected", what)
		}
	}
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: "owner"}, TTL: time.Minute, Fair: true, Queue: time.Minute}
	lost("Acquire", func() error {
		g, err := b.Acquire(ctx, req)
		if err == nil && !g.Acquired {
			err = errors.New("not acquired")
		}
		return err
	})
	lost("Refresh", func() error { _, err := b.Refresh(ctx, req.Lease, time.Minute); return err })
	lost("Release", func() error { return b.Release(ctx, req.Lease) })
	if g, err := b.Acquire(ctx, req); err != nil || !g.Acquired {
		t.Fatalf("Acquire after the release: %+v, %v", g, err)
	}
	lost("Release again", func() error { return b.Release(ctx, req.Lease) })
	if redistest.Held(t, newClient(t, srv.Addr()), redislock.DefaultPrefix, key) {
		t.Error("the lock is still held after the second Release")
	}
}
