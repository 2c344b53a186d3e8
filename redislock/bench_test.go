package redislock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// Compare ratios from one run:
//
//	go test ./redislock -run '^$' -bench . -count 5 -benchmem
//
// BenchmarkFloorSetNXDel is the floor the acquire+release is measured
// against: raw SET NX PX and DEL, two round trips, no fencing, no owner check.

func benchClient(b *testing.B) *redis.Client {
	srv := testserver.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 4})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

func BenchmarkFloorPing(b *testing.B) {
	rdb := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorSetNXDel(b *testing.B) {
	rdb := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := rdb.SetNX(ctx, "floor", "token", 10*time.Second).Result()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := rdb.Del(ctx, "floor").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireRelease: a Mutex's TryLock and Unlock, with and without
// the watchdog; "driver" is the backend's own Acquire and Release, the two
// scripts without the root package's handle, which splits the cost of an
// acquire+release above the floor between the server and the client.
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("driver", func(b *testing.B) {
		rdb := benchClient(b)
		backend := redislock.New(rdb)
		b.Cleanup(func() { backend.Close() })
		ctx := context.Background()
		req := driver.Request{Lease: driver.Lease{Key: "bench", Owner: "bench-owner"}, TTL: 10 * time.Second}
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
		{"watchdog", nil},
		{"noRefresh", []distlock.Option{distlock.WithoutAutoRefresh()}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rdb := benchClient(b)
			backend := redislock.New(rdb)
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

// BenchmarkHandoff: 8 workers, each with its own client (or, "1client",
// goroutines sharing one), pass one lock around. ns/op is the time per
// acquisition; handoff-µs is the mean time from the start of a release to
// the next holder's acquisition, counted when the next holder is another
// worker; cmds/op is the server's command count per acquisition.
func BenchmarkHandoff(b *testing.B) {
	for _, tc := range []struct {
		name    string
		workers int
		shared  bool
		opts    []distlock.Option
	}{
		{"8workers", 8, false, nil},
		{"8workers-1client", 8, true, nil},
		{"8workers-fair", 8, false, []distlock.Option{distlock.WithFairness()}},
		{"2workers-fair", 2, false, []distlock.Option{distlock.WithFairness()}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchHandoff(b, tc.workers, tc.shared, tc.opts...) })
	}
}

func benchHandoff(b *testing.B, workers int, shared bool, opts ...distlock.Option) {
	srv := testserver.StartRedis(b)
	mutexes := make([]*distlock.Mutex, workers)
	var c *distlock.Client
	for i := range mutexes {
		if c == nil || !shared {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			backend := redislock.New(rdb)
			b.Cleanup(func() { backend.Close(); rdb.Close() })
			c = distlock.New(backend, append(opts, distlock.WithTTL(10*time.Second))...)
		}
		mutexes[i] = c.Mutex("handoff")
	}
	cmds0 := srv.Commands(b)
	var (
		base     = time.Now()
		released atomic.Int64 // ns since base when the last release started
		lastBy   atomic.Int64 // worker that released last
		total    atomic.Int64
		count    atomic.Int64
		work     atomic.Int64
		wg       sync.WaitGroup
	)
	work.Store(int64(b.N))
	lastBy.Store(-1)
	ctx := context.Background()
	b.ResetTimer()
	for i := range workers {
		wg.Add(1)
		go func(id int64, m *distlock.Mutex) {
			defer wg.Done()
			for work.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if by := lastBy.Load(); by >= 0 && by != id {
					total.Add(int64(time.Since(base)) - released.Load())
					count.Add(1)
				}
				lastBy.Store(id)
				released.Store(int64(time.Since(base)))
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}(int64(i), mutexes[i])
	}
	wg.Wait()
	b.StopTimer()
	if n := count.Load(); n > 0 {
		b.ReportMetric(float64(total.Load())/float64(n)/1e3, "handoff-µs")
		b.ReportMetric(float64(n)/float64(b.N), "handoffs/op")
	}
	b.ReportMetric(float64(srv.Commands(b)-cmds0)/float64(b.N), "cmds/op")
}
