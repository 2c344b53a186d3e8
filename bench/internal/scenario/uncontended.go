package scenario

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// UncontendedConfig sets the size of an uncontended run.
type UncontendedConfig struct {
	Key    string        // a key no other run uses
	Warmup int           // unmeasured operations first (connections, script cache)
	Ops    int           // measured operations
	TTL    time.Duration // lease length given to the library
}

// Uncontended is the outcome of one uncontended run.
type Uncontended struct {
	Ops         int
	P50, P99    time.Duration
	OpsPerSec   float64
	AllocsPerOp float64
	BytesPerOp  float64
	// Cmds is server commands per operation, by name.
	Cmds map[string]float64
}

// RunUncontended times cfg.Ops acquire+release pairs on one key from a
// single goroutine, each acquire a single attempt. Latency is per pair,
// on the monotonic clock. Allocations are the process's heap allocations
// (runtime.MemStats) during the measured loop divided by the number of
// operations: they include whatever the library's background goroutines
// allocate meanwhile, which is part of its cost.
func RunUncontended(ctx context.Context, lib locker.Library, addrs []string, obs *Observer, cfg UncontendedConfig) (Uncontended, error) {
	var res Uncontended
	lk, err := lib.New(ctx, addrs, cfg.TTL)
	if err != nil {
		return res, fmt.Errorf("%s: %w", lib.Name, err)
	}
	defer lk.Close()

	op := func() error {
		h, err := lk.TryAcquire(ctx, cfg.Key)
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		if err := h.Release(ctx); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		return nil
	}
	for range cfg.Warmup {
		if err := op(); err != nil {
			return res, fmt.Errorf("%s: warm-up: %w", lib.Name, err)
		}
	}

	lat := make([]time.Duration, cfg.Ops)
	before, err := obs.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for i := range lat {
		t := time.Now()
		if err := op(); err != nil {
			return res, fmt.Errorf("%s: operation %d: %w", lib.Name, i, err)
		}
		lat[i] = time.Since(t)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	after, err := obs.Snapshot(ctx)
	if err != nil {
		return res, err
	}

	s := sorted(lat)
	res = Uncontended{
		Ops:         cfg.Ops,
		P50:         percentile(s, 50),
		P99:         percentile(s, 99),
		OpsPerSec:   float64(cfg.Ops) / elapsed.Seconds(),
		AllocsPerOp: float64(m1.Mallocs-m0.Mallocs) / float64(cfg.Ops),
		BytesPerOp:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(cfg.Ops),
		Cmds:        Per(before, after, cfg.Ops),
	}
	return res, nil
}
