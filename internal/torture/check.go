package torture

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Violation kinds; see the package doc.
const (
	VFence           = "fence"
	VDuplicateToken  = "duplicate-token"
	VTokenOrder      = "token-order"
	VExclusion       = "exclusion"
	VDoneLate        = "done-late"
	VStall           = "stall"
	VLinearizability = "linearizability"
	VCrash           = "worker-crash"
)

// ViolationKinds lists the kinds in the order reports show them.
var ViolationKinds = []string{VFence, VDuplicateToken, VTokenOrder, VExclusion, VDoneLate, VStall, VLinearizability, VCrash}

// Violation is one broken promise found in a history.
type Violation struct {
	Kind   string `json:"kind"`
	At     int64  `json:"at"` // when, on the history's clock
	Detail string `json:"detail"`
}

// CheckOptions are the tolerances of the checks.
type CheckOptions struct {
	// Slack is how late after ValidUntil a Done may close.
	Slack time.Duration
	// StallLimit is how long the lock may stay free while a healthy worker
	// asks for it.
	StallLimit time.Duration
	// Recovery is how long after a fault ends its target still counts as
	// faulty: reconnecting and backing off take time.
	Recovery time.Duration
	// LinTimeout bounds the linearizability check; 0 skips it.
	LinTimeout time.Duration
	// ConnectionScoped says that the lock ends the moment its holder's
	// connection to the server does (sqllock's lock=connection), not only
	// at its deadline or release: see checkExclusion.
	ConnectionScoped bool
}

// Findings is what Check found: the violations and the facts the report
// shows without failing.
type Findings struct {
	Violations []Violation `json:"violations"`
	// Linearizable is porcupine's verdict: Ok, Illegal, Unknown (it ran
	// out of time), or "" when not checked.
	Linearizable string `json:"linearizable,omitempty"`
	// Overlaps counts holdings whose "believed held" window, from grant
	// to release or Done (or a later write), overlapped another's.
	Overlaps int `json:"overlapping_windows"`
	// LateAccepted counts writes the register accepted although the
	// writer's Done had closed: nothing newer had been written yet.
	LateAccepted int `json:"late_writes_accepted"`
	// DoneLatency holds, for leases that ran out while held, how long
	// after ValidUntil Done closed (negative: before), in nanoseconds,
	// not counting those whose holder was paused at the time.
	DoneLatency []int64 `json:"-"`
	// LateGrants counts grants whose reply came after their own deadline
	// (a paused server or network): Lock returned a lease already over,
	// whose Done closed at once.
	LateGrants int `json:"late_grants"`
	// DonePaused counts leases that ran out while their holder was paused.
	DonePaused int `json:"done_while_paused"`
	// LongestFree is the longest time the lock stayed free while a healthy
	// worker asked for it, outside server faults (see StallLimit).
	LongestFree time.Duration `json:"longest_free_ns"`
}

// Check runs every check over h.
func Check(h *History, o CheckOptions) Findings {
	f := Findings{Violations: []Violation{}}
	f.Violations = append(f.Violations, checkFence(h.Ops)...)
	f.Violations = append(f.Violations, checkTokens(h.Holdings)...)
	f.Violations = append(f.Violations, checkExclusion(h, o.ConnectionScoped)...)
	f.Violations = append(f.Violations, checkDone(h, o.Slack, &f)...)
	var stall []Violation
	stall, f.LongestFree = checkStall(h, o)
	f.Violations = append(f.Violations, stall...)
	f.Violations = append(f.Violations, checkCrashes(h.Workers)...)
	f.Overlaps = countOverlaps(h)
	for _, op := range h.Ops {
		if op.Write && op.OK && op.Late {
			f.LateAccepted++
		}
	}
	if o.LinTimeout > 0 {
		res := Linearizable(h.Ops, o.LinTimeout)
		f.Linearizable = string(res)
		if res == porcupine.Illegal {
			f.Violations = append(f.Violations, Violation{Kind: VLinearizability, At: h.End,
				Detail: "the register's history is not that of one fenced register"})
		}
	}
	slices.SortStableFunc(f.Violations, func(a, b Violation) int { return cmpInt(a.At, b.At) })
	return f
}

// checkCrashes reports every worker process that crashed: it exited
// although the harness neither killed it nor told it to stop, or failed
// when told to. What it did last went unrecorded, so a crash may hide a
// violation, and a crash in the library (a panic) is a defect of its own.
func checkCrashes(ws []*Worker) []Violation {
	var out []Violation
	for _, w := range ws {
		if !w.Crashed {
			continue
		}
		detail := fmt.Sprintf("worker %s (pid %d) exited with status %d without being killed or told to stop", w.ID, w.Pid, w.Exit)
		if w.Stderr != "" {
			detail += "; its last output: " + strings.Join(strings.Fields(w.Stderr), " ")
		}
		out = append(out, Violation{Kind: VCrash, At: w.End, Detail: detail})
	}
	return out
}

// checkFence checks that every accepted write carries a token above the
// previous accepted one, or the same token from the same holding.
func checkFence(ops []RegOp) []Violation {
	var out []Violation
	var last State
	for _, op := range slices.SortedFunc(slices.Values(ops), func(a, b RegOp) int { return a.seq - b.seq }) {
		if !op.Write || !op.OK {
			continue
		}
		if !last.accepts(op.Token, op.Holding) {
			out = append(out, Violation{Kind: VFence, At: op.Call, Detail: fmt.Sprintf(
				"write with token %d by %s accepted after token %d by %s", op.Token, op.Holding, last.Token, last.Holder)})
		}
		last = State{Token: op.Token, Holder: op.Holding}
	}
	return out
}

// checkTokens checks that no two holdings share a token and that a holding
// granted after another was granted has a higher token. hs is sorted by
// Acquired.
func checkTokens(hs []*Holding) []Violation {
	var out []Violation
	byToken := map[uint64]*Holding{}
	for _, h := range hs {
		if prev, ok := byToken[h.Token]; ok {
			out = append(out, Violation{Kind: VDuplicateToken, At: h.Acquired, Detail: fmt.Sprintf(
				"token %d granted to %s and to %s", h.Token, prev.ID, h.ID)})
			continue
		}
		byToken[h.Token] = h
	}
	// Holdings by the start of their Lock call: every holding acquired
	// before that start was granted before this one, so its token is lower.
	byAttempt := slices.SortedFunc(slices.Values(hs), func(a, b *Holding) int { return cmpInt(a.Attempt, b.Attempt) })
	var (
		i   int
		top *Holding // highest token among holdings acquired so far
	)
	for _, h := range byAttempt {
		for ; i < len(hs) && hs[i].Acquired < h.Attempt; i++ {
			if top == nil || hs[i].Token > top.Token {
				top = hs[i]
			}
		}
		if top != nil && h.Token <= top.Token {
			out = append(out, Violation{Kind: VTokenOrder, At: h.Acquired, Detail: fmt.Sprintf(
				"%s was granted token %d, not above token %d of %s granted before it asked", h.ID, h.Token, top.Token, top.ID)})
		}
	}
	return out
}

// checkExclusion checks that no holding was granted while another holding
// held the lock: from its acquisition to its deadline or the start of its
// release, whichever came first, and, with a connection-scoped lock
// (scoped), no later than the moment its connection may have died (see
// connectionLost), for the server frees such a lock then. A grant whose
// reply came after its own end held nothing (it had ended on the server,
// which may have granted the lock since): it is left out.
func checkExclusion(h *History, scoped bool) []Violation {
	end := (*Holding).validEnd
	what := "lease"
	if scoped {
		lost := connectionLost(h)
		end = func(hd *Holding) int64 {
			if t, ok := lost[hd]; ok {
				return min(t, hd.validEnd())
			}
			return hd.validEnd()
		}
		what = "lease and connection"
	}
	var out []Violation
	var cover *Holding // the holding whose valid lease reaches furthest so far
	for _, hd := range h.Holdings {
		if end(hd) <= hd.Acquired {
			continue
		}
		if cover != nil && hd.Acquired < end(cover) {
			out = append(out, Violation{Kind: VExclusion, At: hd.Acquired, Detail: fmt.Sprintf(
				"%s (token %d) was granted %v before the %s of %s (token %d) ended",
				hd.ID, hd.Token, time.Duration(end(cover)-hd.Acquired), what, cover.ID, cover.Token)})
		}
		if cover == nil || end(hd) > end(cover) {
			cover = hd
		}
	}
	return out
}

// connectionLost returns, for each holding whose connection to the server
// may have died before its lease ended, the earliest moment it may have:
// when its process was killed (stamped before the signal); when its
// worker's connections were cut, or blackholed (a client that gives up on
// a silent connection closes it); when a server fault began (a server
// killed or restarted ends every connection, and a client gives up on a
// paused server's). Those are the deaths the run caused; it cannot see a
// connection that a client closes of its own accord. A holding granted
// during such a fault is taken as lost from its grant.
func connectionLost(h *History) map[*Holding]int64 {
	lost := map[*Holding]int64{}
	at := func(hd *Holding, t int64) {
		t = max(t, hd.Acquired)
		if cur, ok := lost[hd]; !ok || t < cur {
			lost[hd] = t
		}
	}
	for _, hd := range h.Holdings {
		end := hd.validEnd()
		if hd.Killed != 0 && hd.Killed < end {
			at(hd, hd.Killed)
		}
		for _, f := range h.Faults {
			var hits bool
			switch f.Kind {
			case FaultCut, FaultBlackhole:
				hits = f.Slot == hd.Slot
			case FaultServerPause, FaultServerKill, FaultServerRestart, FaultFailover, FaultFailoverPause:
				hits = true
			}
			if hits && f.From < end && f.To > hd.Acquired {
				at(hd, f.From)
			}
		}
	}
	return lost
}

// checkDone checks that each holding's Done closed by its deadline plus
// slack. Time its worker spent paused around the deadline is added: a
// stopped process cannot close a channel.
func checkDone(h *History, slack time.Duration, f *Findings) []Violation {
	pauses := map[int][]Span{}
	for _, ft := range h.Faults {
		if ft.Kind == FaultPause {
			pauses[ft.Slot] = append(pauses[ft.Slot], Span{ft.From, ft.To})
		}
	}
	for _, ps := range pauses {
		slices.SortFunc(ps, func(a, b Span) int { return cmpInt(a.From, b.From) })
	}
	ends := map[string]int64{}
	for _, w := range h.Workers {
		ends[w.ID] = w.End
	}
	var out []Violation
	for _, hd := range h.Holdings {
		if hd.Killed != 0 && (hd.Done == 0 || hd.Done > hd.Killed) {
			continue // a killed process reports nothing
		}
		// A grant whose reply came after its own deadline cannot close
		// Done before it exists: its Done must close at once.
		base := hd.ValidUntil
		if hd.Acquired >= base {
			base = hd.Acquired
			f.LateGrants++
		}
		deadline := base + int64(slack)
		paused := false
		for _, p := range pauses[hd.Slot] {
			if p.From < deadline && p.To >= base-int64(slack) {
				deadline = max(deadline, p.To+int64(slack))
				paused = true
			}
		}
		switch {
		case hd.Done == 0:
			if end := ends[hd.Worker]; end > deadline {
				out = append(out, Violation{Kind: VDoneLate, At: deadline, Detail: fmt.Sprintf(
					"Done of %s never closed, though its deadline passed %v before its worker ended",
					hd.ID, time.Duration(end-hd.ValidUntil))})
			}
			continue
		case hd.Done > deadline:
			out = append(out, Violation{Kind: VDoneLate, At: hd.Done, Detail: fmt.Sprintf(
				"Done of %s closed %v after its ValidUntil (slack %v)", hd.ID, time.Duration(hd.Done-base), slack)})
		}
		if hd.DoneErr == doneExpired && base == hd.ValidUntil {
			if paused {
				f.DonePaused++
			} else {
				f.DoneLatency = append(f.DoneLatency, hd.Done-hd.ValidUntil)
			}
		}
	}
	return out
}

// countOverlaps counts the holdings whose belief window overlapped
// another's.
func countOverlaps(h *History) int {
	n := 0
	var cover *Holding // the window reaching furthest so far
	counted := map[*Holding]bool{}
	for _, hd := range h.Holdings {
		if cover != nil && hd.Acquired < cover.beliefEnd(h.End) {
			for _, x := range []*Holding{cover, hd} {
				if !counted[x] {
					counted[x] = true
					n++
				}
			}
		}
		if cover == nil || hd.beliefEnd(h.End) > cover.beliefEnd(h.End) {
			cover = hd
		}
	}
	return n
}
