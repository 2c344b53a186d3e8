package zklock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// BenchmarkContended8 has 8 clients, each on its own session, take and
// release one key for the benchmark's time: distlock plain and fair
// beside go-zookeeper's zk.Lock, on one 3-node ensemble. Beside ns/op (one
// acquisition), it reports the requests the ensemble received per
// acquisition (every server's packet count, read with mntr: the clients'
// pings are a few per second) and the fewest acquisitions of one worker
// as a share of the mean (min/mean).
//
//	go test ./zklock -run '^$' -bench Contended8 -benchtime 3s -count 3
func BenchmarkContended8(b *testing.B) {
	e := testserver.StartEnsemble(b, 3)
	addrs := e.Addrs()
	const clients = 8
	packets := func() int64 {
		var sum int64
		for _, a := range addrs {
			out, err := testserver.FourLetter(a, "mntr")
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					sum += n
				}
			}
		}
		return sum
	}
	run := func(b *testing.B, lock func(w int) (unlock func() error, err error)) {
		var (
			mu     sync.Mutex
			counts [clients]int
			left   = b.N
			wg     sync.WaitGroup
		)
		before := packets()
		b.ResetTimer()
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					if left <= 0 {
						mu.Unlock()
						return
					}
					left--
					mu.Unlock()
					unlock, err := lock(w)
					if err != nil {
						b.Error(err)
						return
					}
					counts[w]++ // only the holder writes it
					if err := unlock(); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(packets()-before)/float64(b.N), "reqs/acq")
		least := counts[0]
		for _, c := range counts {
			least = min(least, c)
		}
		b.ReportMetric(float64(least)/(float64(b.N)/clients), "min/mean")
	}
	for _, fair := range []bool{false, true} {
		name := "distlock"
		opts := []distlock.Option{distlock.WithTTL(10 * time.Second)}
		if fair {
			name += "Fair"
			opts = append(opts, distlock.WithFairness())
		}
		b.Run(name, func(b *testing.B) {
			var ms [clients]*distlock.Mutex
			for i := range ms {
				ms[i] = distlock.New(newBackend(b, addrs, sessionTimeout), opts...).Mutex("bench-contended8-" + name)
			}
			ctx := context.Background()
			run(b, func(w int) (func() error, error) {
				l, err := ms[w].Lock(ctx)
				if err != nil {
					return nil, err
				}
				return func() error { return l.Unlock(ctx) }, nil
			})
		})
	}
	b.Run("zkLock", func(b *testing.B) {
		var ls [clients]*zk.Lock
		for i := range ls {
			ls[i] = zk.NewLock(dial(b, addrs, sessionTimeout), "/bench-contended8-zklock", zk.WorldACL(zk.PermAll))
		}
		run(b, func(w int) (func() error, error) {
			if err := ls[w].Lock(); err != nil {
				return nil, err
			}
			return ls[w].Unlock, nil
		})
	})
}
