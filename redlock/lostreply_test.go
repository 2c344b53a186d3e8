package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// TestLostReleaseReplies: the release reaches every node, but the replies
// of two of three are lost (their connections close: EOF). The nodes are
// asked again — by go-redis' retries, or by the backend when the clients
// have none — and must report the release they made: Unlock succeeds
// instead of reporting a lost lease or a missed quorum.
func TestLostReleaseReplies(t *testing.T) {
	srvs := startNodes(t, 3)
	proxies := make([]*testserver.Proxy, len(srvs))
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		proxies[i] = testserver.StartProxy(t, s.Addr())
		addrs[i] = proxies[i].Addr()
		// Loaded up front: the reply to drop must be the script's, not NOSCRIPT.
		if err := redisnode.LoadScripts(context.Background(), newClients(t, []string{s.Addr()})[0]); err != nil {
			t.Fatal(err)
		}
	}
	for name, opts := range map[string]redis.Options{
		"no client retries": {ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1},
		"client retries":    {ContextTimeoutEnabled: true},
	} {
		t.Run(name, func(t *testing.T) {
			clients := make([]redis.UniversalClient, len(addrs))
			for i, a := range addrs {
				o := opts
				o.Addr = a
				rdb := redis.NewClient(&o)
				t.Cleanup(func() { rdb.Close() })
				clients[i] = rdb
			}
			b := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
			t.Cleanup(func() { b.Close() })
			c := distlock.New(b, distlock.WithTTL(time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			key := t.Name()
			l, err := c.Mutex(key).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			channel := redistest.Keys(redlock.DefaultPrefix, key).Channel
			dropped := []<-chan struct{}{proxies[0].DropReply(channel), proxies[1].DropReply(channel)}
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock with two of three replies lost: %v; want nil (it released)", err)
			}
			for i, d := range dropped {
				select {
				case <-d:
				default:
					t.Fatalf("node %d: the release's reply was not dropped: the fault was not injected", i)
				}
			}
			for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
				if leased(v) {
					t.Errorf("node %d still has the lock after the release", i)
				}
			}
		})
	}
}

// TestHintAtLeaseEnd: an attempt refused by a holder whose lease is in its
// last millisecond on every node (PTTL 0) reports a positive RetryAfter,
// not 0 ("unknown"), which would send a waiter to its safety poll.
func TestHintAtLeaseEnd(t *testing.T) {
	srvs := startNodes(t, 3)
	b := newBackend(t, addrsOf(srvs))
	ctx := context.Background()
	for round := range 3 {
		key := t.Name() + strconv.Itoa(round)
		g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "holder"}, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("holder: %+v, %v", g, err)
		}
		// The nodes share this machine's clock: the lease ends in the same
		// millisecond on all of them.
		end := strconv.FormatInt(time.Now().Add(30*time.Millisecond).UnixMilli(), 10)
		onNodes(t, srvs, "PEXPIREAT", lockKey(key), end)
		deadline := time.Now().Add(5 * time.Second)
		for {
			g, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: key, Owner: "taker"}, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if g.Acquired {
				break
			}
			if g.RetryAfter <= 0 {
				t.Fatalf("round %d: refused with RetryAfter %v while the holder's lease ends; want > 0", round, g.RetryAfter)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: not granted 5s after the lease's end", round)
			}
		}
	}
}
