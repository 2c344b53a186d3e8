package sqllock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// pair is one way to take a free key and give it back.
type pair struct {
	acquire, release func(ctx context.Context) error
}

// median of d, which it sorts.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkUncontended: one worker, one key always free, the backend's
// acquire and release beside the hand-written lease row that make bench
// calls the floor (an upsert that takes a free or expired row, then a
// DELETE), on one private server. The two alternate at each iteration, so
// that a machine busy with other work slows both alike; it reports each
// statement's median and its ratio to the floor's. The allocations are
// the sum of both.
func BenchmarkUncontended(b *testing.B) {
	b.Run("Postgres", func(b *testing.B) {
		_, d := startPostgres(b)
		relaxDurability(b, d, `ALTER SYSTEM SET fsync = off`, `ALTER SYSTEM SET synchronous_commit = off`, `SELECT pg_reload_conf()`)
		db := d.open(b)
		if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bench_floor (name TEXT PRIMARY KEY, expires_us BIGINT NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		const now = `(EXTRACT(EPOCH FROM now())*1000000)::BIGINT`
		floor := pair{func(ctx context.Context) error {
			res, err := db.ExecContext(ctx, `INSERT INTO bench_floor (name, expires_us) VALUES ($1, `+now+` + $2)
ON CONFLICT (name) DO UPDATE SET expires_us = excluded.expires_us WHERE bench_floor.expires_us < `+now, "k", int64(10_000_000))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				b.Fatalf("floor refused on a free key: %d, %v", n, err)
			}
			return nil
		}, func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, `DELETE FROM bench_floor WHERE name = $1`, "k")
			return err
		}}
		be := d.backend(b)
		l := driver.Lease{Key: "k", Owner: "bench-owner-0123456789"}
		lock := pair{func(ctx context.Context) error {
			g, err := be.Acquire(ctx, driver.Request{Lease: l, TTL: 10 * time.Second})
			if err == nil && !g.Acquired {
				b.Fatal("refused on a free key")
			}
			return err
		}, func(ctx context.Context) error { return be.Release(ctx, l) }}
		alternate(b, floor, lock)
	})
}

// alternate runs floor's and p's acquire and release in turn b.N times
// and reports their medians, and p's ratios to floor's.
func alternate(b *testing.B, floor, p pair) {
	ctx := context.Background()
	var took [2][2][]time.Duration // [floor, p][acquire, release]
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, q := range []pair{floor, p} {
			t0 := time.Now()
			if err := q.acquire(ctx); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := q.release(ctx); err != nil {
				b.Fatal(err)
			}
			took[i][0] = append(took[i][0], t1.Sub(t0))
			took[i][1] = append(took[i][1], time.Since(t1))
		}
	}
	b.StopTimer()
	fa, fr, a, r := median(took[0][0]), median(took[0][1]), median(took[1][0]), median(took[1][1])
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(fa), "floor-µs/acquire")
	b.ReportMetric(us(fr), "floor-µs/release")
	b.ReportMetric(us(a), "µs/acquire")
	b.ReportMetric(us(r), "µs/release")
	b.ReportMetric(float64(a)/float64(fa), "×floor-acquire")
	b.ReportMetric(float64(r)/float64(fr), "×floor-release")
	b.ReportMetric(float64(a+r)/float64(fa+fr), "×floor")
}
