package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// BSM is bsm/redislock over go-redis v9. Waiting polls with
// LinearBackoff(retry); a single attempt uses no retry strategy.
func BSM(retry time.Duration) Library {
	return Library{
		Name: "bsm/redislock", Module: "github.com/bsm/redislock", Kind: Peer, Nodes: 1, Contended: true,
		Config: fmt.Sprintf("waiting: LinearBackoff(%v); single attempt: no retry", retry),
		How: "Acquire and release are one script each (EVALSHA): SET NX PX, or on a taken key a token-prefix check with GETRANGE; " +
			"release compares and deletes. Two round trips per acquire+release, like the floor. A waiter polls at a fixed interval " +
			"(1 ms here): every poll is a round trip and a script run while the key is held, and the first poll to land after a " +
			"release wins, which is most often the releasing worker's own next acquire. It waits until the context's deadline " +
			"(or one TTL when the context has none).",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			c := newGoRedis(addrs[0])
			return &bsmLocker{
				rdb: c, client: redislock.New(c), ttl: ttl,
				wait: &redislock.Options{RetryStrategy: redislock.LinearBackoff(retry)},
			}, nil
		},
	}
}

type bsmLocker struct {
	rdb    *redis.Client
	client *redislock.Client
	ttl    time.Duration
	wait   *redislock.Options
}

type bsmHeld struct{ l *redislock.Lock }

func (h bsmHeld) Release(ctx context.Context) error { return h.l.Release(ctx) }

func (l *bsmLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	lk, err := l.client.Obtain(ctx, key, l.ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, ErrNotObtained
	}
	if err != nil {
		return nil, err
	}
	return bsmHeld{lk}, nil
}

// Acquire relies on ctx to end the wait: without a deadline on ctx,
// bsm/redislock stops retrying after one TTL.
func (l *bsmLocker) Acquire(ctx context.Context, key string) (Held, error) {
	lk, err := l.client.Obtain(ctx, key, l.ttl, l.wait)
	if err != nil {
		return nil, err
	}
	return bsmHeld{lk}, nil
}

func (l *bsmLocker) Close() error { return l.rdb.Close() }
