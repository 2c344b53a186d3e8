package torture

import (
	"fmt"
	"slices"
	"time"
)

// checkStall finds the longest time during which nobody held the lock,
// no server fault was under way, and at least one worker whose process
// and connection were healthy was asking for the lock. Longer than
// o.StallLimit is a violation: a lease whose holder died or went silent
// must free the key once it has run out.
func checkStall(h *History, o CheckOptions) ([]Violation, time.Duration) {
	const (
		block = iota
		server
		wait
		excuse
	)
	type point struct {
		t     int64
		kind  int
		delta int
		slot  int
	}
	var pts []point
	add := func(kind, slot int, from, to int64) {
		if to > from {
			pts = append(pts, point{from, kind, 1, slot}, point{to, kind, -1, slot})
		}
	}
	for _, hd := range h.Holdings {
		end := max(hd.Done, hd.ReleaseStart, hd.Released)
		if hd.Killed != 0 {
			end = max(end, hd.Killed, hd.ValidUntil)
		}
		if end == 0 {
			end = h.End
		}
		add(block, 0, hd.Acquired, end)
	}
	recovery := int64(o.Recovery)
	for _, f := range h.Faults {
		switch f.Kind {
		case FaultServerPause, FaultServerKill, FaultServerRestart, FaultFailover, FaultFailoverPause:
			add(server, 0, f.From, f.To+recovery)
		case FaultPause, FaultCut, FaultBlackhole:
			add(excuse, f.Slot, f.From, f.To+recovery)
		}
	}
	slots := 0
	for _, w := range h.Workers {
		slots = max(slots, w.Slot+1)
		for _, s := range w.Waits {
			add(wait, w.Slot, s.From, s.To)
		}
	}
	slices.SortFunc(pts, func(a, b point) int { return cmpInt(a.t, b.t) })

	var (
		blocks, servers, healthy int
		waiting                  = make([]int, slots)
		excused                  = make([]int, slots)
		freeSince                int64 // start of the current free, wanted stretch; 0: none
		longest                  int64
		out                      []Violation
	)
	isHealthy := func(s int) bool { return waiting[s] > 0 && excused[s] == 0 }
	closeAt := func(t int64) {
		if freeSince == 0 {
			return
		}
		if d := t - freeSince; d > longest {
			longest = d
		}
		if d := t - freeSince; d > int64(o.StallLimit) {
			out = append(out, Violation{Kind: VStall, At: freeSince, Detail: fmt.Sprintf(
				"the lock was free for %v while a healthy worker asked for it (limit %v)", time.Duration(d), o.StallLimit)})
		}
		freeSince = 0
	}
	for i, p := range pts {
		switch p.kind {
		case block:
			blocks += p.delta
		case server:
			servers += p.delta
		case wait, excuse:
			before := isHealthy(p.slot)
			if p.kind == wait {
				waiting[p.slot] += p.delta
			} else {
				excused[p.slot] += p.delta
			}
			if after := isHealthy(p.slot); after != before {
				if after {
					healthy++
				} else {
					healthy--
				}
			}
		}
		if i+1 < len(pts) && pts[i+1].t == p.t {
			continue // decide once all changes at this instant are in
		}
		wanted := blocks == 0 && servers == 0 && healthy > 0
		switch {
		case wanted && freeSince == 0:
			freeSince = p.t
		case !wanted:
			closeAt(p.t)
		}
	}
	closeAt(h.End)
	return out, time.Duration(longest)
}
