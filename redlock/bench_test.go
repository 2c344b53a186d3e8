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
	"github.com/distlock-go/distlock/redlock"
)

// Compare from one run (the ratio of the medians is the figure of merit):
//
//	go test ./redlock -run '^$' -bench . -count 5 -benchmem
//
// BenchmarkFloorSetNXDel is what any Redlock must at least do: SET NX PX on
// five masters in parallel, then DEL on the five in parallel — two round
// trips, one goroutine per node and step, no owner check, no fencing
// token. BenchmarkAcquireRelease does the same two round trips with the
// scripts (owner check, token, release notification), on the same kind of
// clients: "driver" calls the backend directly, the others go through
// distlock's TryLock and Unlock.

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

func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("driver", func(b *testing.B) {
		backend := redlock.New(benchClients(b))
		b.Cleanup(func() { backend.Close() })
		ctx := context.Background()
		req := driver.AcquireRequest{Key: "bench", Owner: "owner", TTL: 10 * time.Second}
		b.ReportAllocs()
		for b.Loop() {
			g, err := backend.Acquire(ctx, req)
			if err != nil || !g.Acquired {
				b.Fatal(g, err)
			}
			if err := backend.Release(ctx, req.Key, req.Owner); err != nil {
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
