package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// faultCounter counts injected faults by kind.
type faultCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *faultCounter) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
}

func (c *faultCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *faultCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// scheduler injects faults at random moments drawn from a generator seeded
// with the run's seed. The sequence of draws does not depend on what the
// workers do, so a seed replays the same kinds, moments and durations;
// only "the current holder" as a target depends on the run.
type scheduler struct {
	h       *harness
	rng     *rand.Rand
	classes []string

	mu         sync.Mutex
	pending    map[*pending]struct{}
	serverBusy bool
	wg         sync.WaitGroup
}

// pending is a fault under way: end undoes it, once.
type pending struct {
	once  sync.Once
	timer *time.Timer
	end   func()
}

func newScheduler(h *harness, seed uint64) *scheduler {
	s := &scheduler{h: h, rng: rand.New(rand.NewPCG(seed, seed^0x746f7274757265)), pending: map[*pending]struct{}{}}
	for _, c := range h.cfg.Faults {
		if !contains(s.classes, c) {
			s.classes = append(s.classes, c)
		}
	}
	return s
}

// frac returns a duration between lo and hi times the TTL, by x in [0, 1).
func (s *scheduler) frac(lo, hi, x float64) time.Duration {
	return time.Duration((lo + (hi-lo)*x) * float64(s.h.cfg.TTL))
}

// run injects faults until ctx ends: one every half to two TTLs.
func (s *scheduler) run(ctx context.Context) {
	for {
		gap := s.frac(0.5, 2, s.rng.Float64())
		// Every draw is made whatever the fault turns out to be, so that
		// the sequence stays the same for a seed.
		class := ""
		if len(s.classes) > 0 {
			class = s.classes[s.rng.IntN(len(s.classes))]
		}
		preferHolder := s.rng.Float64() < 0.6
		pick := s.rng.IntN(len(s.h.slots))
		x := s.rng.Float64()
		variant := s.rng.IntN(s.variants())
		t := time.NewTimer(gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		switch class {
		case ClassPause:
			if sl := s.target(preferHolder, pick); sl != nil {
				s.pause(sl, s.frac(1.5, 3, x))
			}
		case ClassKill:
			if sl := s.target(preferHolder, pick); sl != nil {
				s.kill(sl, s.frac(0, 1, x))
			}
		case ClassCut:
			if sl := s.target(preferHolder, pick); sl != nil {
				s.cut(sl, variant == 0, s.frac(0.5, 2, x))
			}
		case ClassServer:
			s.server(pick, variant, x)
		}
	}
}

// target picks a slot with no fault under way: the holder's, if asked and
// there is one, else the first free one from pick on. It marks it faulted.
func (s *scheduler) target(preferHolder bool, pick int) *slot {
	n := len(s.h.slots)
	if preferHolder {
		if hs := s.h.rec.holder(); hs >= 0 {
			pick = hs
		}
	}
	for i := range n {
		sl := s.h.slots[(pick+i)%n]
		sl.mu.Lock()
		free := !sl.faulted && sl.proc != nil && !sl.proc.Exited()
		if free {
			sl.faulted = true
		}
		sl.mu.Unlock()
		if free {
			return sl
		}
	}
	return nil
}

func release(sl *slot) {
	sl.mu.Lock()
	sl.faulted = false
	sl.mu.Unlock()
}

// later runs end after d, or at once when the run ends (endAll).
func (s *scheduler) later(d time.Duration, end func()) {
	p := &pending{end: end}
	s.mu.Lock()
	s.pending[p] = struct{}{}
	s.wg.Add(1)
	p.timer = time.AfterFunc(d, func() { s.finish(p) })
	s.mu.Unlock()
}

func (s *scheduler) finish(p *pending) {
	p.once.Do(func() {
		defer s.wg.Done()
		p.end()
		s.mu.Lock()
		delete(s.pending, p)
		s.mu.Unlock()
	})
}

// endAll ends every fault under way at once and waits for them.
func (s *scheduler) endAll() {
	s.mu.Lock()
	ps := make([]*pending, 0, len(s.pending))
	for p := range s.pending {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.timer.Stop()
		s.finish(p)
	}
	s.wg.Wait()
}

func (s *scheduler) pause(sl *slot, d time.Duration) {
	sl.mu.Lock()
	p, w := sl.proc, sl.w
	sl.mu.Unlock()
	if err := p.Pause(); err != nil {
		release(sl)
		return
	}
	i := s.h.rec.fault(Fault{Kind: FaultPause, Target: w.ID, Slot: sl.n, From: time.Now().UnixNano()})
	s.h.faults.add(FaultPause)
	s.later(d, func() {
		_ = p.Resume()
		s.h.rec.faultEnded(i, time.Now())
		release(sl)
	})
}

func (s *scheduler) kill(sl *slot, restartAfter time.Duration) {
	sl.mu.Lock()
	p, w := sl.proc, sl.w
	sl.mu.Unlock()
	now := sl.markKilled(p).UnixNano()
	p.Kill(stopGrace)
	s.h.rec.fault(Fault{Kind: FaultKill, Target: w.ID, Slot: sl.n, From: now, To: now})
	s.h.faults.add(FaultKill)
	s.later(restartAfter, func() {
		defer release(sl)
		if s.h.isStopped() {
			return
		}
		if err := s.h.spawn(sl); err != nil {
			s.h.note(fmt.Sprintf("worker slot %d not replaced: %v", sl.n, err))
		}
	})
}

func (s *scheduler) cut(sl *slot, blackhole bool, d time.Duration) {
	sl.mu.Lock()
	w := sl.w
	sl.mu.Unlock()
	kind := FaultCut
	if blackhole {
		kind = FaultBlackhole
	}
	// Stamped first: a connection-scoped lock is freed as soon as its
	// connection is reset.
	from := time.Now().UnixNano()
	for _, p := range sl.proxies {
		if blackhole {
			p.Blackhole()
		} else {
			p.Cut()
		}
	}
	i := s.h.rec.fault(Fault{Kind: kind, Target: w.ID, Slot: sl.n, From: from})
	s.h.faults.add(kind)
	s.later(d, func() {
		for _, p := range sl.proxies {
			p.Restore()
		}
		s.h.rec.faultEnded(i, time.Now())
		release(sl)
	})
}

// variants returns the number of kinds of server fault: pause, kill and
// restart, and failover if the deployment has failovers.
func (s *scheduler) variants() int {
	if s.h.cfg.Failover != nil {
		return 4
	}
	return 3
}

// failoverTimeout bounds a failover fault.
const failoverTimeout = 30 * time.Second

// server pauses (variant 0), kills and later restarts (1), or restarts
// (2) a server, or makes the deployment fail over (3), one server fault at
// a time. The server is the primary for an even pick if Config.Primary
// knows it, else the pick-th.
func (s *scheduler) server(pick, variant int, x float64) {
	s.mu.Lock()
	if s.serverBusy {
		s.mu.Unlock()
		return
	}
	s.serverBusy = true
	s.mu.Unlock()
	srv := s.h.cfg.Servers[pick%len(s.h.cfg.Servers)]
	if s.h.cfg.Primary != nil && pick%2 == 0 {
		if p := s.h.cfg.Primary(); p != nil {
			srv = p
		}
	}
	done := func() {
		s.mu.Lock()
		s.serverBusy = false
		s.mu.Unlock()
	}
	from := time.Now().UnixNano()
	record := func(kind string) int {
		s.h.faults.add(kind)
		return s.h.rec.fault(Fault{Kind: kind, Target: srv.Addr(), Slot: -1, From: from})
	}
	switch variant {
	case 3:
		// A hung master half the time, a failover on request otherwise.
		pause := x < 0.5
		kind := FaultFailover
		if pause {
			kind = FaultFailoverPause
		}
		if p := s.h.cfg.Primary; p != nil {
			if m := p(); m != nil {
				srv = m
			}
		}
		f := record(kind)
		s.later(0, func() {
			ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
			defer cancel()
			if err := s.h.cfg.Failover(ctx, pause); err != nil {
				s.h.note(fmt.Sprintf("%s: %v", kind, err))
			}
			s.h.rec.faultEnded(f, time.Now())
			done()
		})
	case 0:
		if err := srv.Pause(); err != nil {
			done()
			return
		}
		f := record(FaultServerPause)
		s.later(s.frac(0.5, 2, x), func() {
			_ = srv.Resume()
			s.h.rec.faultEnded(f, time.Now())
			done()
		})
	case 1:
		if err := srv.Kill(); err != nil {
			s.h.note(err.Error())
			done()
			return
		}
		f := record(FaultServerKill)
		s.later(s.frac(0, 1, x), func() {
			s.restart(srv)
			s.h.rec.faultEnded(f, time.Now())
			done()
		})
	default:
		f := record(FaultServerRestart)
		s.later(0, func() {
			s.restart(srv)
			s.h.rec.faultEnded(f, time.Now())
			done()
		})
	}
}

func (s *scheduler) restart(srv launch.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	restart := srv.Restart
	if s.h.cfg.Restart != nil {
		restart = func(ctx context.Context) error { return s.h.cfg.Restart(ctx, srv) }
	}
	if err := restart(ctx); err != nil {
		s.h.note(fmt.Sprintf("restarting %s: %v", srv.Addr(), err))
	}
}
