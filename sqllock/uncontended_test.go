package sqllock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// timed runs acquire then release b.N times and reports each one's mean
// beside the pair's, so that a change to one statement shows as its own.
func timed(b *testing.B, acquire, release func(ctx context.Context) error) {
	ctx := context.Background()
	var inAcquire, inRelease time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := acquire(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := release(ctx); err != nil {
			b.Fatal(err)
		}
		inAcquire += t1.Sub(t0)
		inRelease += time.Since(t1)
	}
	b.ReportMetric(float64(inAcquire.Microseconds())/float64(b.N), "µs/acquire")
	b.ReportMetric(float64(inRelease.Microseconds())/float64(b.N), "µs/release")
}

// BenchmarkUncontended: one worker, one key always free, the backend's
// acquire and release beside the hand-written lease row that make bench
// calls the floor (an upsert that takes a free or expired row, then a
// DELETE). Run with -benchtime 5000x -count 5 and compare medians.
func BenchmarkUncontended(b *testing.B) {
	b.Run("Postgres", func(b *testing.B) {
		_, d := startPostgres(b)
		relaxDurability(b, d, `ALTER SYSTEM SET fsync = off`, `ALTER SYSTEM SET synchronous_commit = off`, `SELECT pg_reload_conf()`)
		b.Run("floor", func(b *testing.B) {
			db := d.open(b)
			if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bench_floor (name TEXT PRIMARY KEY, expires_us BIGINT NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			const now = `(EXTRACT(EPOCH FROM now())*1000000)::BIGINT`
			var ttl int64 = 10_000_000
			timed(b, func(ctx context.Context) error {
				res, err := db.ExecContext(ctx, `INSERT INTO bench_floor (name, expires_us) VALUES ($1, `+now+` + $2)
ON CONFLICT (name) DO UPDATE SET expires_us = excluded.expires_us WHERE bench_floor.expires_us < `+now, "k", ttl)
				if err == nil {
					err = oneRow(res)
				}
				return err
			}, func(ctx context.Context) error {
				_, err := db.ExecContext(ctx, `DELETE FROM bench_floor WHERE name = $1`, "k")
				return err
			})
		})
		b.Run("sqllock", func(b *testing.B) {
			be := d.backend(b)
			l := driver.Lease{Key: "k", Owner: "bench-owner-0123456789"}
			timed(b, func(ctx context.Context) error {
				g, err := be.Acquire(ctx, driver.Request{Lease: l, TTL: 10 * time.Second})
				if err == nil && !g.Acquired {
					b.Fatal("refused on a free key")
				}
				return err
			}, func(ctx context.Context) error { return be.Release(ctx, l) })
		})
	})
}

func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		panic("floor refused on a free key")
	}
	return err
}
