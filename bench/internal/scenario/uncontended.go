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

// UncontendedRun times acquire+release pairs on one key from a single
// goroutine, each acquire a single attempt. It is measured in slices
// ([UncontendedRun.Slice]) so that the caller can alternate libraries
// slice by slice: on a shared machine whose speed changes from one second
// to the next, every library then meets the same conditions.
//
// Latency is per pair, on the monotonic clock. Allocations are the
// process's heap allocations (runtime.MemStats) during the measured slices
// divided by the operations: they include what the library's background
// goroutines allocate meanwhile, which is part of its cost.
type UncontendedRun struct {
	lib  locker.Library
	lk   locker.Locker
	cfg  UncontendedConfig
	obs  *Observer
	lat  []time.Duration
	busy time.Duration
	// Sums over the slices.
	mallocs, bytes uint64
	before, after  Counts
}

// StartUncontended connects the library and runs the warm-up.
func StartUncontended(ctx context.Context, lib locker.Library, addrs []string, obs *Observer, cfg UncontendedConfig) (*UncontendedRun, error) {
	lk, err := lib.New(ctx, addrs, cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lib.Name, err)
	}
	r := &UncontendedRun{lib: lib, lk: lk, cfg: cfg, obs: obs, before: Counts{}, after: Counts{}}
	for range cfg.Warmup {
		if err := r.op(ctx); err != nil {
			lk.Close()
			return nil, fmt.Errorf("%s: warm-up: %w", lib.Name, err)
		}
	}
	return r, nil
}

func (r *UncontendedRun) op(ctx context.Context) error {
	h, err := r.lk.TryAcquire(ctx, r.cfg.Key)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// Slice measures n more operations.
func (r *UncontendedRun) Slice(ctx context.Context, n int) error {
	lat := make([]time.Duration, n)
	before, err := r.obs.Snapshot(ctx)
	if err != nil {
		return err
	}
	// Start from a collected heap, so that no slice pays for another
	// library's garbage.
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for i := range lat {
		t := time.Now()
		if err := r.op(ctx); err != nil {
			return fmt.Errorf("%s: operation %d: %w", r.lib.Name, len(r.lat)+i, err)
		}
		lat[i] = time.Since(t)
	}
	busy := time.Since(start)
	runtime.ReadMemStats(&m1)
	after, err := r.obs.Snapshot(ctx)
	if err != nil {
		return err
	}
	r.lat = append(r.lat, lat...)
	r.busy += busy
	r.mallocs += m1.Mallocs - m0.Mallocs
	r.bytes += m1.TotalAlloc - m0.TotalAlloc
	for k, v := range before {
		r.before[k] += v
	}
	for k, v := range after {
		r.after[k] += v
	}
	return nil
}

// Result summarizes the slices measured so far.
func (r *UncontendedRun) Result() Uncontended {
	n := len(r.lat)
	if n == 0 {
		return Uncontended{}
	}
	s := sorted(r.lat)
	return Uncontended{
		Ops:         n,
		P50:         percentile(s, 50),
		P99:         percentile(s, 99),
		OpsPerSec:   float64(n) / r.busy.Seconds(),
		AllocsPerOp: float64(r.mallocs) / float64(n),
		BytesPerOp:  float64(r.bytes) / float64(n),
		Cmds:        Per(r.before, r.after, n),
	}
}

// Close closes the library's connections.
func (r *UncontendedRun) Close() error { return r.lk.Close() }
