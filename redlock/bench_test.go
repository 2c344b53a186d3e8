package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/redlock"
)

// Compare from one run (the ratios of the medians are the figures of merit):
//
//	go test ./redlock -run '^$' -bench . -count 5 -benchmem
//
// BenchmarkFloorSetNXDel is what any Redlock must at least do: SET NX PX on
// five masters in parallel, then DEL on the five in parallel — two round
// trips, one goroutine per node and step, no owner check, no fencing
// token. BenchmarkFloorScripts does the same with the scripts every
// distlock Redis backend runs (token, owner check, release notification),
// and nothing else. BenchmarkAcquireRelease is the backend: "driver" calls
// it directly, the others go through distlock's TryLock and Unlock.
//
// On a machine where the five servers and the client share few cores, the
// scripts' server time dominates the distance to the first floor; the
// distance to the second is what this package adds.

// benchClients starts five masters and returns a client for each.
func benchClients(b *testing.B) []redis.UniversalClient {
	srvs := startNodes(b, 5)
	cs := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		b.Cleanup(func() { rdb.Close() })
		cs[i] = rdb
	}
	return cs
}

var errTaken = errors.New("floor: key already set")

func BenchmarkFloorSetNXDel(b *testing.B) {
	cs := benchClients(b)
	ctx := context.Background()
	set := []any{"set", "floor", "token", "nx", "px", "10000"}
	del := []any{"del", "floor"}
	errs := make([]error, len(cs))
	each := func(args []any, nx bool) error {
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() {
				err := c.Do(ctx, args...).Err()
				if nx && errors.Is(err, redis.Nil) {
					err = errTaken
				}
				errs[i] = err
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := each(set, true); err != nil {
			b.Fatal(err)
		}
		if err := each(del, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorScripts is the floor with redislock's scripts instead of
// the bare commands: the acquire script (token, owner, metadata) on five
// masters in parallel, then the release script. The distance from
// BenchmarkFloorSetNXDel is what the scripts cost the servers; the distance
// to BenchmarkAcquireRelease/driver is what Redlock adds on the client.
func BenchmarkFloorScripts(b *testing.B) {
	cs := benchClients(b)
	ctx := context.Background()
	k := redistest.Keys(redlock.DefaultPrefix, "floor")
	errs := make([]error, len(cs))
	each := func(op func(c redis.UniversalClient) error) error {
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() { errs[i] = op(c) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	acquire := func(c redis.UniversalClient) error {
		token, _, err := redisnode.Acquire(ctx, c, k, "owner", 10*time.Second, "")
		if err == nil && token == 0 {
			err = errTaken
		}
		return err
	}
	release := func(c redis.UniversalClient) error {
		_, err := redisnode.Release(ctx, c, k, "owner")
		return err
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := each(acquire); err != nil {
			b.Fatal(err)
		}
		if err := each(release); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("driver", func(b *testing.B) {
		backend := redlock.New(benchClients(b))
		b.Cleanup(func() { backend.Close() })
		ctx := context.Background()
		req := driver.Request{Lease: driver.Lease{Key: "bench", Owner: "owner"}, TTL: 10 * time.Second}
		b.ReportAllocs()
		for b.Loop() {
			g, err := backend.Acquire(ctx, req)
			if err != nil || !g.Acquired {
				b.Fatal(g, err)
			}
			if err := backend.Release(ctx, req.Lease); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name string
		opts []distlock.Option
	}{
		{"noRefresh", []distlock.Option{distlock.WithoutAutoRefresh()}},
		{"watchdog", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			backend := redlock.New(benchClients(b))
			b.Cleanup(func() { backend.Close() })
			m := distlock.New(backend, append(tc.opts, distlock.WithTTL(10*time.Second))...).Mutex("bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.TryLock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
