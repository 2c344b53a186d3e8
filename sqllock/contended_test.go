package sqllock_test

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/sqllock"
	"github.com/distlock-go/distlock/sqllock/pglisten"
)

// contenders is how many workers the contended benchmarks run on one key,
// each with its own pool, as processes would.
const contenders = 8

// contendedLock is one worker's way to take and give back the key: it
// returns the release.
type contendedLock func(ctx context.Context) (release func(), err error)

// runContended runs b.N acquisitions of one key spread over the workers
// that newWorker makes, and reports the handoffs per second (an
// acquisition by another worker than the last holder) and, when count is
// given, the server requests per acquisition. A worker found inside
// while another holds fails the benchmark.
func runContended(b *testing.B, newWorker func(i int) contendedLock, count func() int) {
	workers := make([]contendedLock, contenders)
	for i := range workers {
		workers[i] = newWorker(i)
	}
	ctx := context.Background()
	var (
		left     atomic.Int64
		inside   atomic.Int32
		mu       sync.Mutex
		last     = -1
		handoffs int
		wg       sync.WaitGroup
	)
	left.Store(int64(b.N))
	if count != nil {
		count()
	}
	b.ResetTimer()
	start := time.Now()
	for i, lock := range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				release, err := lock(ctx)
				if err != nil {
					b.Errorf("worker %d: %v", i, err)
					return
				}
				if inside.Add(1) != 1 {
					b.Errorf("worker %d: two holders at once", i)
				}
				mu.Lock()
				if last != i && last >= 0 {
					handoffs++
				}
				last = i
				mu.Unlock()
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(handoffs)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	if count != nil {
		b.ReportMetric(float64(count())/float64(b.N), "requests/acq")
	}
}

// distlockWorkers makes workers that each lock the key through a client
// of their own on a pool of their own, whose requests are counted.
func distlockWorkers(b *testing.B, d database, opts ...distlock.Option) (func(int) contendedLock, func() int) {
	var counters []*countingConnector
	newWorker := func(int) contendedLock {
		db, c := d.counting(b)
		counters = append(counters, c)
		var sopts []sqllock.Option
		if d.driver == "pgx" {
			// The counted pool's connections are not pgx's own: the
			// listener gets a pool of its own.
			sopts = append(sopts, sqllock.WithListener(pglisten.New(d.open(b))))
		}
		be, err := sqllock.New(db, sopts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Close() })
		client := distlock.New(be, append([]distlock.Option{distlock.WithTTL(10 * time.Second)}, opts...)...)
		m := client.Mutex("contended")
		return func(ctx context.Context) (func(), error) {
			l, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() {
				if err := l.Unlock(ctx); err != nil {
					b.Errorf("Unlock: %v", err)
				}
			}, nil
		}
	}
	count := func() int {
		n := 0
		for _, c := range counters {
			n += len(requests(c.take()))
		}
		return n
	}
	return newWorker, count
}

// nativeWorkers makes workers that each hold one connection and take the
// database's own lock on it: lock and unlock are the statements.
func nativeWorkers(b *testing.B, d database, lock, unlock string) func(int) contendedLock {
	return func(int) contendedLock {
		db := d.open(b)
		conn, err := db.Conn(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		return func(ctx context.Context) (func(), error) {
			var got sql.NullInt64
			if err := conn.QueryRowContext(ctx, lock).Scan(&got); err != nil {
				return nil, err
			}
			return func() {
				if _, err := conn.ExecContext(ctx, unlock); err != nil {
					b.Errorf("unlock: %v", err)
				}
			}, nil
		}
	}
}

// relaxDurability runs stmts on d: the benchmarks' servers do not flush
// each commit to disk, as in make bench, so that a commit costs what the
// statements do rather than what the disk does.
func relaxDurability(b *testing.B, d database, stmts ...string) {
	db := d.open(b)
	for _, q := range stmts {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

// benchSQLLock runs the contended loop on d through sqllock, plain and
// fair.
func benchSQLLock(b *testing.B, d database) {
	b.Run("sqllock", func(b *testing.B) {
		w, c := distlockWorkers(b, d)
		runContended(b, w, c)
	})
	b.Run("sqllock-fair", func(b *testing.B) {
		w, c := distlockWorkers(b, d, distlock.WithFairness())
		runContended(b, w, c)
	})
}

// BenchmarkContended: 8 workers on one key, each with its own pool, beside
// the database's own lock held on one connection per worker. Run with
// -benchtime 3000x or so: a few seconds of contention each.
func BenchmarkContended(b *testing.B) {
	b.Run("Postgres", func(b *testing.B) {
		_, d := startPostgres(b)
		relaxDurability(b, d, `ALTER SYSTEM SET synchronous_commit = off`, `SELECT pg_reload_conf()`)
		b.Run("pg_advisory_lock", func(b *testing.B) {
			runContended(b, nativeWorkers(b, d, `SELECT 1 FROM (SELECT pg_advisory_lock(28)) x`, `SELECT pg_advisory_unlock(28)`), nil)
		})
		benchSQLLock(b, d)
	})
	b.Run("MariaDB", func(b *testing.B) {
		_, d := startMariaDB(b)
		// The test server's user may not SET GLOBAL: MariaDB flushes each
		// commit here, for sqllock and GET_LOCK alike.
		b.Run("GET_LOCK", func(b *testing.B) {
			runContended(b, nativeWorkers(b, d, `SELECT GET_LOCK('contended', 60)`, `DO RELEASE_LOCK('contended')`), nil)
		})
		benchSQLLock(b, d)
	})
}
