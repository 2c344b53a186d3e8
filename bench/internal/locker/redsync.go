package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Redsync is go-redsync/redsync v4 over go-redis v9, one pool per node.
// retryDelay 0 keeps its default (a random 50–250 ms between 32 tries).
func Redsync(nodes int, retryDelay time.Duration) Library {
	name, cfg := "redsync", "defaults: 32 tries, random 50–250 ms between them"
	if retryDelay > 0 {
		name = fmt.Sprintf("redsync (retry %v)", retryDelay)
		cfg = fmt.Sprintf("WithRetryDelay(%v), 32 tries", retryDelay)
	}
	if nodes > 1 {
		name = fmt.Sprintf("%s, %d nodes", name, nodes)
	}
	return Library{
		Name: name, Module: "github.com/go-redsync/redsync/v4", Kind: Peer, Nodes: nodes,
		Contended: nodes == 1 || retryDelay > 0,
		Config:    cfg + "; WithExpiry(TTL); a new Mutex per acquisition",
		How: "Acquire is a plain SET NX PX, release a compare-and-delete script (GET, then DEL) sent as EVALSHA: " +
			"two round trips, as the floor, with a script on the way out. Each step fans out to every node from a goroutine per node, " +
			"and each attempt runs under its own timeout context. A waiter sleeps between attempts (default: a random 50–250 ms) " +
			"and returns ErrFailed after 32 attempts (with the default delays, after about 5 s); nothing tells it the key was " +
			"freed, so it notices only at its next attempt, " +
			"and the releasing worker, which asks again at once, usually wins. With a 1 ms delay the 32 attempts last only " +
			"a few tens of milliseconds, so under contention it gives up often.",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			clients := newGoRedisAll(addrs)
			pools := make([]redsyncredis.Pool, len(clients))
			for i, c := range clients {
				pools[i] = goredis.NewPool(c)
			}
			opts := []redsync.Option{redsync.WithExpiry(ttl)}
			if retryDelay > 0 {
				opts = append(opts, redsync.WithRetryDelay(retryDelay))
			}
			return &redsyncLocker{rs: redsync.New(pools...), opts: opts, clients: clients}, nil
		},
	}
}

type redsyncLocker struct {
	rs      *redsync.Redsync
	opts    []redsync.Option
	clients []*redis.Client
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported not held")
	}
	return err
}

func (l *redsyncLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	m := l.rs.NewMutex(key, l.opts...)
	if err := m.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
			return nil, ErrNotObtained
		}
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (l *redsyncLocker) Acquire(ctx context.Context, key string) (Held, error) {
	m := l.rs.NewMutex(key, l.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (l *redsyncLocker) Close() error { return closeAll(l.clients) }
