package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redlock"
)

// BenchmarkContended runs 8 workers, each with its own backend and
// clients (as separate processes would), that take one key on five masters
// with Lock, as fast as they can, for 3s. It reports handoffs and
// acquisitions per second, the wait's median, p99 and maximum, releases
// that failed (a node stalled past the release timeout), and per
// acquisition the attempts and every server command (INFO commandstats
// over the five masters), by name: del/acq beyond 5 counts the grants that
// split votes gave back. One iteration is the whole run:
//
//	go test ./redlock -run '^$' -bench Contended -benchtime 1x -count 3
func BenchmarkContended(b *testing.B) {
	const workers = 8
	srvs := startNodes(b, 5)
	addrs := addrsOf(srvs)
	admin := newClients(b, addrs)
	ctx := context.Background()

	var attempts atomic.Int64
	obs := distlock.ObserverFunc(func(_ context.Context, e distlock.Event) {
		if e.Type == distlock.EventAttempt {
			attempts.Add(1)
		}
	})
	mutexes := make([]*distlock.Mutex, workers)
	for w := range mutexes {
		be := redlock.New(newClients(b, addrs))
		b.Cleanup(func() { be.Close() })
		if err := be.DeclareFresh(ctx); err != nil {
			b.Fatal(err)
		}
		mutexes[w] = distlock.New(be, distlock.WithTTL(10*time.Second), distlock.WithObserver(obs)).Mutex("contended")
	}
	// Warm up: every worker subscribes and loads the scripts.
	for _, m := range mutexes {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	attempts.Store(0)
	before := commandStats(b, admin)

	var (
		acquired, handoffs atomic.Int64
		releaseErrs        atomic.Int64
		last               atomic.Int64
		mu                 sync.Mutex
		waits              []time.Duration
	)
	last.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for w, m := range mutexes {
		wg.Go(func() {
			var mine []time.Duration
			for {
				select {
				case <-stop:
					mu.Lock()
					waits = append(waits, mine...)
					mu.Unlock()
					return
				default:
				}
				t := time.Now()
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t))
				acquired.Add(1)
				if last.Swap(int64(w)) != int64(w) {
					handoffs.Add(1)
				}
				if err := l.Unlock(ctx); err != nil {
					// A node that stalls past the release's timeout on a
					// busy machine: the lease lapses instead.
					releaseErrs.Add(1)
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	after := commandStats(b, admin)

	n := float64(acquired.Load())
	b.ReportMetric(float64(handoffs.Load())/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(attempts.Load())/n, "attempts/acq")
	var total float64
	for name, v := range after {
		d := float64(v-before[name]) / n
		total += d
		if d >= 0.05 {
			b.ReportMetric(d, name+"/acq")
		}
	}
	b.ReportMetric(total, "cmds/acq")
	b.ReportMetric(float64(releaseErrs.Load()), "release-errors")
	slicesSort(waits)
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "wait-p99-ms")
		b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "wait-p50-ms")
		b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "wait-max-ms")
	}
}

func slicesSort(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// commandStats sums INFO commandstats' calls over the masters.
func commandStats(tb testing.TB, cs []redis.UniversalClient) map[string]int64 {
	tb.Helper()
	m := map[string]int64{}
	for _, c := range cs {
		s, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(s, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok {
				continue
			}
			name = strings.TrimPrefix(name, "cmdstat_")
			calls, _, _ := strings.Cut(rest, ",")
			v, _ := strconv.ParseInt(calls, 10, 64)
			if name != "info" {
				m[name] += v
			}
		}
	}
	return m
}
