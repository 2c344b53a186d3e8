package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redislock"
	"github.com/distlock-go/distlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Distlock lists the distlock backends under test.
func Distlock() []Library {
	return []Library{DistlockRedis(), DistlockRedisFair(), DistlockRedlock(5)}
}

// DistlockRedisFair is distlock's first-come, first-served mode on one node.
func DistlockRedisFair() Library {
	return Library{
		Name: "distlock (redislock, fair)", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
		Config: "distlock.New(redislock.New(rdb), WithTTL(TTL), WithFairness())",
		How: "As distlock (redislock), but a waiter joins the key's queue (a sorted set in the same hash slot) with its " +
			"first attempt, and the fair acquire script grants the lock only to the oldest live waiter: no barging by the " +
			"last holder, waits bounded by the queue ahead. The release hands the lock over: in the same script it grants the " +
			"oldest live waiter a lease as long as its place in line (3s), and the wake-up message carries the grant, so that " +
			"waiter holds the lock without another request and renews it to the full TTL later. A waiter that gives up leaves " +
			"the queue in one script.",
		New: func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			rdb := newLockClient(addrs[0])
			be := redislock.New(rdb)
			if err := be.DeclareFresh(ctx); err != nil { // the bench's servers are new
				return nil, errors.Join(err, be.Close(), rdb.Close())
			}
			return &distlockLocker{
				c:     distlock.New(be, distlock.WithTTL(ttl), distlock.WithFairness()),
				close: func() error { return errors.Join(be.Close(), rdb.Close()) },
			}, nil
		},
	}
}

// DistlockRedis is distlock over its redislock backend on one node.
func DistlockRedis() Library {
	return Library{
		Name: "distlock (redislock)", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
		Config: "distlock.New(redislock.New(rdb), WithTTL(TTL)), defaults otherwise: auto-refresh every TTL/3, notified waiting; rdb with the settings redislock asks for (ContextTimeoutEnabled, MaxRetries -1, DialerRetries 1)",
		How: "Acquire is one script (EVALSHA): read the lock key and the fencing counter in one MGET, and if the key is " +
			"free (no key, or the small free record a release leaves) read the server's TIME and SET the lease with PX, its " +
			"token above the last one and at least the server clock in µs; release is one script that compares the owner, " +
			"writes the free record over the lease (the last token, and a receipt for a repeat after a lost reply), and " +
			"PUBLISHes on the key's channel only if an attempt was refused by that lease (the refusal marks it). So one round " +
			"trip each way, with a fencing token and an ownership check the floor lacks. A waiter " +
			"subscribes on its first failed attempt (one pub/sub connection per client, shared by all its waiters), tries " +
			"again at once unless that subscription was already live and carried no release since its attempt, then " +
			"sleeps until a release message names its client or the holder's remaining TTL runs out: a refused attempt " +
			"enlists the client beside the lock, and a release wakes the client enlisted first, not every waiter. Each " +
			"held lock has one timer (no goroutine) that renews the lease every TTL/3 and ends the handle at its local deadline.",
		New: func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			rdb := newLockClient(addrs[0])
			be := redislock.New(rdb)
			if err := be.DeclareFresh(ctx); err != nil { // the bench's servers are new
				return nil, errors.Join(err, be.Close(), rdb.Close())
			}
			return &distlockLocker{
				c:     distlock.New(be, distlock.WithTTL(ttl)),
				close: func() error { return errors.Join(be.Close(), rdb.Close()) },
			}, nil
		},
	}
}

// DistlockRedisShared is distlock (redislock) with every worker of the
// contended scenario sharing one client, as the goroutines of one process
// would: they take turns on the server (see distlock.Mutex.Lock).
func DistlockRedisShared() Library {
	var (
		mu      sync.Mutex
		refs    int
		c       *distlock.Client
		release func() error
	)
	return Library{
		Name: "distlock (redislock), 1 shared client", Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 1, Contended: true,
		Config: "one distlock.New(redislock.New(rdb), WithTTL(TTL)) shared by every worker",
		How: "As distlock (redislock), but the workers are goroutines of one client. They wait in line in the client, " +
			"one of them at a time asking the server, and take the lock in the order they asked for it: the process is " +
			"one waiter on the server, and a release wakes one goroutine, not eight.",
		New: func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			mu.Lock()
			defer mu.Unlock()
			if refs == 0 {
				rdb := newLockClient(addrs[0])
				be := redislock.New(rdb)
				if err := be.DeclareFresh(ctx); err != nil {
					return nil, errors.Join(err, be.Close(), rdb.Close())
				}
				c = distlock.New(be, distlock.WithTTL(ttl))
				release = func() error { return errors.Join(be.Close(), rdb.Close()) }
			}
			refs++
			return &distlockLocker{c: c, close: func() error {
				mu.Lock()
				defer mu.Unlock()
				if refs--; refs > 0 {
					return nil
				}
				return release()
			}}, nil
		},
	}
}

type distlockLocker struct {
	c     *distlock.Client
	close func() error
}

type distlockHeld struct{ l *distlock.Lock }

func (h distlockHeld) Release(ctx context.Context) error { return h.l.Unlock(ctx) }

func (d *distlockLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	l, err := d.c.Mutex(key).TryLock(ctx)
	if errors.Is(err, distlock.ErrNotObtained) {
		return nil, ErrNotObtained
	}
	if err != nil {
		return nil, err
	}
	return distlockHeld{l}, nil
}

func (d *distlockLocker) Acquire(ctx context.Context, key string) (Held, error) {
	l, err := d.c.Mutex(key).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return distlockHeld{l}, nil
}

func (d *distlockLocker) Close() error { return d.close() }

// DistlockRedlock is distlock over its redlock backend on five masters.
func DistlockRedlock(nodes int) Library {
	return Library{
		Name: fmt.Sprintf("distlock (redlock), %d nodes", nodes), Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: nodes, Contended: true,
		Config: "distlock.New(redlock.New(clients), WithTTL(TTL)), defaults otherwise: per-node timeout a quarter of the TTL, at most 1 s, auto-refresh every TTL/3; clients as redislock's",
		How: "The same acquire and release scripts as redislock, sent to every master at once from one goroutine per node; " +
			"acquire succeeds on a quorum within the lease's validity, stops waiting as soon as the outcome is decided, and " +
			"writes the largest fencing token back only when the nodes disagree (each node's counter floors at its clock in " +
			"100 ms steps and is raised by INCR). Release compares and deletes on every master, publishing where a waiter was " +
			"refused, and waits for all of them (or the per-node timeout). A waiter subscribes on every master and wakes once " +
			"per release; woken, it asks the key's gate node first and the other nodes only if the gate grants it (see below).",
		New: func(ctx context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			clients := make([]*redis.Client, len(addrs))
			for i, a := range addrs {
				clients[i] = newLockClient(a)
			}
			ucs := make([]redis.UniversalClient, len(clients))
			for i, c := range clients {
				ucs[i] = c
			}
			be := redlock.New(ucs)
			if err := be.DeclareFresh(ctx); err != nil { // the bench's servers are new
				return nil, errors.Join(err, be.Close(), closeAll(clients))
			}
			return &distlockLocker{
				c:     distlock.New(be, distlock.WithTTL(ttl)),
				close: func() error { return errors.Join(be.Close(), closeAll(clients)) },
			}, nil
		},
	}
}
