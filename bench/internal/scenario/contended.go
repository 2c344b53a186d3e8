package scenario

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// ContendedConfig sets the shape of a contended run.
type ContendedConfig struct {
	Key      string        // a key no other run uses
	Workers  int           // goroutines, each with its own Locker (own connections)
	Duration time.Duration // how long the workers compete
	Hold     time.Duration // time spent holding the lock (0: just the counter update)
	TTL      time.Duration // lease length given to the library
}

// Contended is the outcome of one contended run.
type Contended struct {
	Elapsed      time.Duration
	Acquisitions int
	AcqPerSec    float64
	Handoffs     int
	HandoffsPerS float64
	// Handoff latency: from the moment the previous holder started its
	// release call to the moment the next holder's acquire returned, for
	// acquisitions by a worker other than the last holder.
	HandoffMean, HandoffP99 time.Duration
	// Wait: from the moment a worker wants the lock (through any give-ups
	// and retries) until its acquire returns. A wait still running when the
	// run ends counts with the time waited so far, so starvation shows.
	WaitP50, WaitP99, WaitMax time.Duration
	// HandedWaitP99 is the wait p99 of the acquisitions that were
	// handoffs: the wait of a worker that had to let others go first,
	// without the quick re-acquisitions of a worker that barges.
	HandedWaitP99 time.Duration
	// Reacquired is the share of acquisitions (after the first) won by the
	// worker that held the lock last.
	Reacquired float64
	// PerWorkerMin and PerWorkerMax count acquisitions per worker.
	PerWorkerMin, PerWorkerMax int
	// GiveUps counts acquire calls that returned an error while the run
	// was still going (the library stopped waiting on its own).
	GiveUps int
	// Overlaps counts acquisitions that found another holder still inside
	// the critical section; LostUpdates is how far a shared counter,
	// incremented non-atomically under the lock, fell short. Both must be 0.
	Overlaps, LostUpdates int
	// RTT is the median of PINGs sent every few milliseconds during the
	// run on a connection of its own: a round trip under the run's load.
	RTT time.Duration
	// Cmds is server commands per acquisition, by name (the PINGs that
	// measured RTT left out).
	Cmds map[string]float64
	// FirstErr is the first give-up error, for the report.
	FirstErr string
}

// pingEvery spaces the PINGs that measure the round trip during a run:
// a few hundred a second, next to thousands of lock commands.
const pingEvery = 5 * time.Millisecond

// shared is the state the holders pass along under the lock. Everything is
// atomic because the race detector cannot see the ordering a distributed
// lock provides.
type shared struct {
	base      time.Time
	inside    atomic.Int32
	overlaps  atomic.Int64
	counter   atomic.Int64 // read then written, never incremented atomically
	holder    atomic.Int32 // 1-based worker id of the last holder, 0: none
	releaseAt atomic.Int64 // ns since base when the last holder began releasing
}

type workerStats struct {
	acquisitions int
	handoffs     []time.Duration
	waits        []time.Duration
	handedWaits  []time.Duration
	reacquired   int
	giveUps      int
	firstErr     error
}

// RunContended has cfg.Workers goroutines, each with its own Locker, take
// and release one key for cfg.Duration using the library's blocking
// acquire.
func RunContended(ctx context.Context, lib locker.Library, addrs []string, obs *Observer, cfg ContendedConfig) (Contended, error) {
	var res Contended
	lks := make([]locker.Locker, cfg.Workers)
	defer func() {
		for _, lk := range lks {
			if lk != nil {
				lk.Close()
			}
		}
	}()
	for i := range lks {
		lk, err := lib.New(ctx, addrs, cfg.TTL)
		if err != nil {
			return res, fmt.Errorf("%s: %w", lib.Name, err)
		}
		lks[i] = lk
		// Connect and load scripts before the clock starts.
		h, err := lk.TryAcquire(ctx, cfg.Key+":warm")
		if err != nil {
			return res, fmt.Errorf("%s: warm-up: %w", lib.Name, err)
		}
		if err := h.Release(ctx); err != nil {
			return res, fmt.Errorf("%s: warm-up release: %w", lib.Name, err)
		}
	}

	before, err := obs.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	sh := &shared{}
	stats := make([]workerStats, cfg.Workers)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range lks {
		wg.Go(func() { work(runCtx, begin, sh, int32(i+1), lks[i], cfg, &stats[i]) })
	}
	// The run is ended by cancellation, not a deadline: some libraries
	// shorten the lease to the context's deadline.
	var rtts []time.Duration
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		tick := time.NewTicker(pingEvery)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				if d, err := obs.RTT(runCtx); err == nil {
					rtts = append(rtts, d)
				}
			}
		}
	}()
	sh.base = time.Now()
	timer := time.AfterFunc(cfg.Duration, stop)
	defer timer.Stop()
	close(begin)
	<-runCtx.Done()
	elapsed := time.Since(sh.base)
	wg.Wait()
	<-pinged
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	after, err := obs.Snapshot(ctx)
	if err != nil {
		return res, err
	}

	var handoffs, waits, handed []time.Duration
	reacq := 0
	res.PerWorkerMin = -1
	for _, s := range stats {
		res.Acquisitions += s.acquisitions
		handoffs = append(handoffs, s.handoffs...)
		waits = append(waits, s.waits...)
		handed = append(handed, s.handedWaits...)
		reacq += s.reacquired
		res.GiveUps += s.giveUps
		if res.PerWorkerMin < 0 || s.acquisitions < res.PerWorkerMin {
			res.PerWorkerMin = s.acquisitions
		}
		res.PerWorkerMax = max(res.PerWorkerMax, s.acquisitions)
		if s.firstErr != nil && res.FirstErr == "" {
			res.FirstErr = s.firstErr.Error()
		}
	}
	res.Elapsed = elapsed
	res.AcqPerSec = float64(res.Acquisitions) / elapsed.Seconds()
	res.Handoffs = len(handoffs)
	res.HandoffsPerS = float64(len(handoffs)) / elapsed.Seconds()
	hs, ws := sorted(handoffs), sorted(waits)
	res.HandoffMean, res.HandoffP99 = mean(hs), percentile(hs, 99)
	res.WaitP50, res.WaitP99 = percentile(ws, 50), percentile(ws, 99)
	if len(ws) > 0 {
		res.WaitMax = ws[len(ws)-1]
	}
	res.HandedWaitP99 = percentile(sorted(handed), 99)
	if res.Acquisitions > 1 {
		res.Reacquired = float64(reacq) / float64(res.Acquisitions-1)
	}
	res.Overlaps = int(sh.overlaps.Load())
	res.LostUpdates = res.Acquisitions - int(sh.counter.Load())
	// The PINGs that timed the round trip are not the library's. (One
	// cancelled at the end may still have reached the server: negligible.)
	after["ping"] -= int64(len(rtts))
	res.RTT = percentile(sorted(rtts), 50)
	res.Cmds = Per(before, after, res.Acquisitions)
	if res.Acquisitions == 0 {
		return res, fmt.Errorf("%s: no acquisition in %v (first error: %s)", lib.Name, cfg.Duration, res.FirstErr)
	}
	return res, nil
}

func work(ctx context.Context, begin <-chan struct{}, sh *shared, me int32, lk locker.Locker, cfg ContendedConfig, st *workerStats) {
	<-begin
	for ctx.Err() == nil {
		want := time.Now()
		var h locker.Held
		for {
			var err error
			h, err = lk.Acquire(ctx, cfg.Key)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				st.waits = append(st.waits, time.Since(want)) // unfinished: the time so far
				return
			}
			st.giveUps++
			if st.firstErr == nil {
				st.firstErr = err
			}
		}
		got := time.Now()
		st.waits = append(st.waits, got.Sub(want))
		st.acquisitions++

		// Critical section.
		if sh.inside.Add(1) != 1 {
			sh.overlaps.Add(1)
		}
		v := sh.counter.Load()
		if cfg.Hold > 0 {
			time.Sleep(cfg.Hold)
		}
		sh.counter.Store(v + 1)
		switch prev := sh.holder.Load(); {
		case prev == me:
			st.reacquired++
		case prev != 0:
			st.handoffs = append(st.handoffs, got.Sub(sh.base)-time.Duration(sh.releaseAt.Load()))
			st.handedWaits = append(st.handedWaits, got.Sub(want))
		}
		sh.holder.Store(me)
		sh.inside.Add(-1)
		sh.releaseAt.Store(int64(time.Since(sh.base)))

		// Released even after the run ended, on a fresh bounded context.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := h.Release(rctx)
		cancel()
		if err != nil && st.firstErr == nil {
			st.firstErr = fmt.Errorf("release: %w", err)
		}
	}
}
