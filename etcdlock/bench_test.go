package etcdlock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// The benchmarks compare etcdlock with etcd's own concurrency.Mutex on the
// same 3-member cluster: one acquire and release without contention, and
// the hand-off of one lock between two clients that both want it.
//
//	go test -run '^$' -bench . -benchtime 2s ./etcdlock

// cluster starts a 3-member cluster for one benchmark.
func cluster(b *testing.B) *etcdtest.Cluster {
	return etcdtest.StartCluster(b, 3)
}

func BenchmarkUncontended(b *testing.B) {
	c := cluster(b)
	cli := c.Client(b) // one client for both: the same connections
	ctx := context.Background()
	b.Run("etcdlock", func(b *testing.B) {
		eb := etcdlock.New(cli)
		defer eb.Close()
		m := distlock.New(eb, distlock.WithTTL(10*time.Second)).Mutex(uniqueKey("bench"))
		for b.Loop() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The backend alone, without package distlock's handle: what the
	// backend's two transactions cost.
	b.Run("etcdlock-driver", func(b *testing.B) {
		eb := etcdlock.New(cli)
		defer eb.Close()
		key := uniqueKey("bench")
		for b.Loop() {
			l := driver.Lease{Key: key, Owner: uniqueKey("owner")}
			if g, err := eb.Acquire(ctx, driver.Request{Lease: l, TTL: 10 * time.Second}); err != nil || !g.Acquired {
				b.Fatal(g, err)
			}
			if err := eb.Release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		m := concurrency.NewMutex(s, uniqueKey("bench"))
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandoff: two clients take turns on one lock, each waiting
// while the other holds it; an operation is one acquisition and release.
func BenchmarkHandoff(b *testing.B) { benchmarkHandoff(b, 2) }

// BenchmarkHandoff8: eight clients contend for one lock, each taking it
// again as soon as it released it.
func BenchmarkHandoff8(b *testing.B) { benchmarkHandoff(b, 8) }

// benchmarkHandoff passes one lock between n clients that all want it,
// each on a client (connection) of its own. Besides the time per
// acquisition it reports the median handoff (handoff-ns): from the moment
// a holder starts its release to the moment another client's acquire
// returns.
func benchmarkHandoff(b *testing.B, n int) {
	c := cluster(b)
	ctx := context.Background()
	b.Run("etcdlock", func(b *testing.B) {
		key := uniqueKey("bench")
		var ms []*distlock.Mutex
		for range n {
			ms = append(ms, distlock.New(newBackend(b, c), distlock.WithTTL(10*time.Second), distlock.WithFairness()).Mutex(key))
		}
		handoff(b, n, func(i int) (func() error, error) {
			l, err := ms[i].Lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Unlock(ctx) }, nil
		})
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		key := uniqueKey("bench")
		var ms []*concurrency.Mutex
		for range n {
			s, err := concurrency.NewSession(c.Client(b), concurrency.WithTTL(10))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ms = append(ms, concurrency.NewMutex(s, key))
		}
		handoff(b, n, func(i int) (func() error, error) {
			if err := ms[i].Lock(ctx); err != nil {
				return nil, err
			}
			return func() error { return ms[i].Unlock(ctx) }, nil
		})
	})
}

// handoff runs b.N acquisitions split between n goroutines that all
// contend for the lock lock(i) takes, and reports the median handoff.
func handoff(b *testing.B, n int, lock func(i int) (unlock func() error, err error)) {
	var (
		mu       sync.Mutex
		last     = -1      // the last holder
		released time.Time // when it started its release
		handoffs []time.Duration
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range n {
		ops := b.N / n
		if i < b.N%n {
			ops++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				unlock, err := lock(i)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if last >= 0 && last != i {
					handoffs = append(handoffs, time.Since(released))
				}
				last, released = i, time.Now()
				mu.Unlock()
				if err := unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(handoffs) > 0 {
		slices.Sort(handoffs)
		b.ReportMetric(float64(handoffs[len(handoffs)/2].Nanoseconds()), "handoff-ns")
		b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Nanoseconds()), "handoff-p99-ns")
	}
}

// BenchmarkUncontendedPaired alternates one etcdlock acquire+release with
// one of concurrency.Mutex, on one client, and reports the time of each
// (etcdlock-ns/op, mutex-ns/op) and their ratio: on a shared machine, both
// see the same load, which separate benchmarks do not. Between them it
// times the write floor on the same client: a Put and a Delete of a key of
// its own (floor-ns/op, two writes, as a lock and its release are at the
// least). Medians (the p50 metrics, and p50-ratio) are what a slow
// outlier does not move.
func BenchmarkUncontendedPaired(b *testing.B) {
	p := newPair(b)
	var es, ms, fs []time.Duration
	for b.Loop() {
		e, m, f := p.once(b)
		es, ms, fs = append(es, e), append(ms, m), append(fs, f)
	}
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Nanoseconds()) / float64(len(ds))
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds())
	}
	b.ReportMetric(mean(es), "etcdlock-ns/op")
	b.ReportMetric(mean(ms), "mutex-ns/op")
	b.ReportMetric(mean(es)/mean(ms), "ratio")
	b.ReportMetric(median(es), "etcdlock-p50-ns")
	b.ReportMetric(median(ms), "mutex-p50-ns")
	b.ReportMetric(median(fs), "floor-p50-ns")
	b.ReportMetric(median(es)/median(ms), "p50-ratio")
}

// pair is an etcdlock mutex and a concurrency.Mutex on one client of a
// 3-member cluster, each on a lock of its own, and that client.
type pair struct {
	em    *distlock.Mutex
	cm    *concurrency.Mutex
	cli   *clientv3.Client
	floor string // the key of the write floor
}

func newPair(b *testing.B) pair {
	c := cluster(b)
	cli := c.Client(b)
	eb := etcdlock.New(cli)
	b.Cleanup(func() { _ = eb.Close() })
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return pair{
		em:    distlock.New(eb, distlock.WithTTL(10*time.Second)).Mutex(uniqueKey("bench")),
		cm:    concurrency.NewMutex(s, uniqueKey("bench")),
		cli:   cli,
		floor: uniqueKey("floor"),
	}
}

// once takes and releases each lock once, writes and deletes the floor's
// key, and returns how long each took.
func (p pair) once(b *testing.B) (etcdlock, mutex, floor time.Duration) {
	ctx := context.Background()
	start := time.Now()
	l, err := p.em.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	mid := time.Now()
	if err := p.cm.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := p.cm.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	end := time.Now()
	if _, err := p.cli.Put(ctx, p.floor, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := p.cli.Delete(ctx, p.floor); err != nil {
		b.Fatal(err)
	}
	return mid.Sub(start), end.Sub(mid), time.Since(end)
}

// BenchmarkUncontendedGrowth is BenchmarkUncontendedPaired on one lock
// for many iterations, reporting the time of each library's first and
// last tenth of them (early-ns/op, late-ns/op): a lock whose line gains a
// key etcd keeps per acquisition grows slower as it is used, until the
// cluster is compacted.
//
//	go test -run '^$' -bench UncontendedGrowth -benchtime 3000x ./etcdlock
func BenchmarkUncontendedGrowth(b *testing.B) {
	p := newPair(b)
	var te, tc []time.Duration
	for b.Loop() {
		e, m, _ := p.once(b)
		te, tc = append(te, e), append(tc, m)
	}
	tenth := len(te) / 10
	if tenth == 0 {
		return
	}
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Nanoseconds()) / float64(len(ds))
	}
	b.ReportMetric(mean(te[:tenth]), "etcdlock-early-ns/op")
	b.ReportMetric(mean(te[len(te)-tenth:]), "etcdlock-late-ns/op")
	b.ReportMetric(mean(tc[:tenth]), "mutex-early-ns/op")
	b.ReportMetric(mean(tc[len(tc)-tenth:]), "mutex-late-ns/op")
	b.ReportMetric(mean(te[len(te)-tenth:])/mean(tc[len(tc)-tenth:]), "late-ratio")
}

// BenchmarkHandoffFloor is the least a notified handoff costs on etcd:
// one client deletes a key that another client watches, and the time runs
// from the delete's start to the watcher's receipt of the event
// (floor-ns, median; write-ns, the delete's own round trip). A lock's
// handoff adds the release's check and the new holder's bookkeeping.
//
//	go test -run '^$' -bench HandoffFloor -benchtime 1000x ./etcdlock
func BenchmarkHandoffFloor(b *testing.B) {
	c := cluster(b)
	writer, watcher := c.Client(b), c.Client(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := uniqueKey("floor")
	events := watcher.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithFilterPut())
	var floors, writes []time.Duration
	for b.Loop() {
		if _, err := writer.Put(ctx, key, ""); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := writer.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(start))
		if resp := <-events; resp.Err() != nil || len(resp.Events) == 0 {
			b.Fatalf("watch: %v", resp.Err())
		}
		floors = append(floors, time.Since(start))
	}
	slices.Sort(floors)
	slices.Sort(writes)
	b.ReportMetric(float64(floors[len(floors)/2].Nanoseconds()), "floor-ns")
	b.ReportMetric(float64(writes[len(writes)/2].Nanoseconds()), "write-ns")
}
