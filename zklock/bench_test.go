package zklock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// Compare the figures of one run, on one 3-node ensemble:
//
//	go test ./zklock -run '^$' -bench . -count 5
//
// FloorCreateDelete is the floor: the raw create of an ephemeral
// sequential node and its delete, two round trips, no line, no token.
func BenchmarkEnsemble(b *testing.B) {
	e := testserver.StartEnsemble(b, 3)
	addrs := e.Addrs()
	b.Run("FloorCreateDelete", func(b *testing.B) {
		conn := dial(b, addrs, sessionTimeout)
		if _, err := conn.Create("/floor", nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			b.Fatal(err)
		}
		for b.Loop() {
			p, err := conn.Create("/floor/n-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			if err != nil {
				b.Fatal(err)
			}
			if err := conn.Delete(p, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Uncontended", func(b *testing.B) {
		m := distlock.New(newBackend(b, addrs, sessionTimeout), distlock.WithTTL(10*time.Second)).Mutex("bench-uncontended")
		ctx := context.Background()
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
	for _, fair := range []bool{false, true} {
		name := "Contended4"
		opts := []distlock.Option{distlock.WithTTL(10 * time.Second)}
		if fair {
			name += "Fair"
			opts = append(opts, distlock.WithFairness())
		}
		b.Run(name, func(b *testing.B) {
			const clients = 4
			ms := make([]*distlock.Mutex, clients)
			for i := range ms {
				ms[i] = distlock.New(newBackend(b, addrs, sessionTimeout), opts...).Mutex("bench-contended-" + name)
			}
			left := atomic.Int64{}
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, m := range ms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					for left.Add(-1) >= 0 {
						l, err := m.Lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if err := l.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
