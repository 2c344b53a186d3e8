package torture

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

var checkOpts = CheckOptions{
	Slack:      100 * time.Millisecond,
	StallLimit: time.Second,
	Recovery:   200 * time.Millisecond,
	LinTimeout: 10 * time.Second,
}

// held returns a holding of slot granted at acq (its Lock call began 10ms
// earlier) with a lease until acq+500ms, released at rel.
func held(slot int, token uint64, acq, rel int64) *Holding {
	id := workerID(slot, 1)
	return &Holding{ID: id + "." + itoa(token), Worker: id, Slot: slot, Token: token,
		Attempt: acq - 10*ms, Acquired: acq, ValidUntil: acq + 500*ms,
		ReleaseStart: rel, Released: rel + ms, Done: rel + ms, DoneErr: doneReleased}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// history makes a well-formed history of the holdings: two workers that
// are always waiting when they do not hold, one write per holding.
func history(hs ...*Holding) *History {
	h := &History{}
	for _, hd := range hs {
		h.End = max(h.End, hd.ValidUntil+10*ms, hd.Done+10*ms)
	}
	for slot := range 2 {
		w := &Worker{ID: workerID(slot, 1), Slot: slot, Start: 0, End: h.End}
		var last int64
		for _, hd := range hs {
			if hd.Slot == slot {
				w.Waits = append(w.Waits, Span{last, hd.Acquired})
				last = max(hd.Released, hd.Done)
			}
		}
		w.Waits = append(w.Waits, Span{last, h.End})
		h.Workers = append(h.Workers, w)
	}
	slices.SortFunc(hs, func(a, b *Holding) int { return cmpInt(a.Acquired, b.Acquired) })
	h.Holdings = hs
	var reg Register
	for i, hd := range hs {
		op := RegOp{Worker: hd.Worker, Holding: hd.ID, Write: true, Token: hd.Token, Value: "v"}
		st := reg.state
		op.OK = st.accepts(op.Token, op.Holding)
		if op.OK {
			reg.state = State{Token: op.Token, Holder: op.Holding, Value: op.Value}
		}
		op.State, op.seq = reg.state, i
		op.Call, op.Return = hd.Acquired+ms, hd.Acquired+2*ms
		h.Ops = append(h.Ops, op)
	}
	return h
}

func kinds(f Findings) []string {
	var out []string
	for _, v := range f.Violations {
		if !slices.Contains(out, v.Kind) {
			out = append(out, v.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func TestChecks(t *testing.T) {
	cases := []struct {
		name string
		h    func() *History
		want []string
	}{
		{"clean", func() *History {
			return history(held(0, 1, 100*ms, 200*ms), held(1, 2, 210*ms, 300*ms), held(0, 3, 310*ms, 400*ms))
		}, nil},
		{"a token granted twice", func() *History {
			return history(held(0, 1, 100*ms, 200*ms), held(1, 1, 210*ms, 300*ms))
		}, []string{VDuplicateToken, VTokenOrder}},
		{"a lower token granted later", func() *History {
			return history(held(0, 5, 100*ms, 200*ms), held(1, 4, 210*ms, 300*ms))
		}, []string{VTokenOrder}},
		{"overlapping Lock calls may be granted in either order", func() *History {
			a, b := held(0, 5, 100*ms, 200*ms), held(1, 4, 210*ms, 300*ms)
			b.Attempt = 90 * ms // asked before a was granted
			return history(a, b)
		}, nil},
		{"granted while another lease was valid", func() *History {
			return history(held(0, 1, 100*ms, 400*ms), held(1, 2, 300*ms, 500*ms))
		}, []string{VExclusion}},
		{"granted after the other lease ran out", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, a.ValidUntil, doneExpired
			return history(a, held(1, 2, a.ValidUntil+5*ms, a.ValidUntil+50*ms))
		}, nil},
		{"a grant that came after its deadline held nothing, so excluded nobody", func() *History {
			// Granted on the server before b, its reply came (to a paused
			// worker) after its lease had ended there and b was granted.
			b := held(1, 2, 100*ms, 400*ms)
			a := held(0, 1, 200*ms, 0)
			a.Attempt, a.ValidUntil = 50*ms, 95*ms
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, 201*ms, doneExpired
			return history(a, b)
		}, nil},
		{"Done closed late", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, a.ValidUntil+300*ms, doneExpired
			return history(a)
		}, []string{VDoneLate}},
		{"Done closed late because the holder was paused", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, a.ValidUntil+300*ms, doneExpired
			h := history(a)
			h.Faults = []Fault{{Kind: FaultPause, Slot: 0, From: a.ValidUntil - 100*ms, To: a.ValidUntil + 280*ms}}
			return h
		}, nil},
		{"a grant that came after its deadline closes Done at once", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ValidUntil = 90 * ms
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, 101*ms, doneExpired
			return history(a)
		}, nil},
		{"a grant that came after its deadline keeps Done open", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ValidUntil = 90 * ms
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, 300*ms, doneExpired
			return history(a)
		}, []string{VDoneLate}},
		{"Done never closed", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done = 0, 0, 0
			h := history(a)
			h.Workers[0].End += int64(time.Second) // it lived on, and never said
			return h
		}, []string{VDoneLate}},
		{"a killed holder's Done is not checked", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.Killed = 0, 0, 0, 200*ms
			return history(a, held(1, 2, a.ValidUntil+10*ms, a.ValidUntil+20*ms))
		}, nil},
		{"the lock stays free while a worker waits", func() *History {
			return history(held(0, 1, 100*ms, 200*ms), held(1, 2, 3000*ms, 3100*ms))
		}, []string{VStall}},
		{"free during a server fault", func() *History {
			h := history(held(0, 1, 100*ms, 200*ms), held(1, 2, 3000*ms, 3100*ms))
			h.Faults = []Fault{{Kind: FaultServerKill, Slot: -1, From: 150 * ms, To: 2900 * ms}}
			return h
		}, nil},
		{"free while every waiter is cut off", func() *History {
			h := history(held(0, 1, 100*ms, 200*ms), held(1, 2, 3000*ms, 3100*ms))
			h.Faults = []Fault{
				{Kind: FaultCut, Slot: 0, From: 150 * ms, To: 2900 * ms},
				{Kind: FaultBlackhole, Slot: 1, From: 150 * ms, To: 2900 * ms},
			}
			return h
		}, nil},
		{"a killed holder's key blocks until its deadline", func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.Killed = 0, 0, 0, 150*ms
			a.ValidUntil = 2000 * ms // renewed before it died
			return history(a, held(1, 2, 2100*ms, 2200*ms))
		}, nil},
		{"the register accepted a lower token", func() *History {
			h := history(held(0, 1, 100*ms, 200*ms), held(1, 2, 210*ms, 300*ms))
			late := RegOp{Worker: "0.1", Holding: h.Holdings[0].ID, Write: true, Token: 1, OK: true,
				Call: 305 * ms, Return: 306 * ms, seq: 2}
			late.State = State{Token: 1, Holder: late.Holding}
			h.Ops = append(h.Ops, late)
			return h
		}, []string{VFence, VLinearizability}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Check(tc.h(), checkOpts)
			if got := kinds(f); !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v", got, tc.want)
				for _, v := range f.Violations {
					t.Logf("  %s: %s", v.Kind, v.Detail)
				}
			}
		})
	}
}

func TestLinearizableRejectsAReadOfNothingWritten(t *testing.T) {
	ops := []RegOp{
		{Holding: "a", Write: true, Token: 1, Value: "x", OK: true, Call: 1, Return: 2, State: State{1, "a", "x"}},
		{Holding: "b", Write: false, Call: 3, Return: 4, State: State{2, "b", "y"}},
	}
	if got := Linearizable(ops, 5*time.Second); got != "Illegal" {
		t.Fatalf("verdict %q, want Illegal", got)
	}
	ops[1].State = ops[0].State
	if got := Linearizable(ops, 5*time.Second); got != "Ok" {
		t.Fatalf("verdict %q, want Ok", got)
	}
}

func TestRegisterFences(t *testing.T) {
	var r Register
	now := time.Now()
	steps := []struct {
		token  uint64
		holder string
		ok     bool
	}{
		{5, "a", true}, {5, "a", true}, {5, "b", false}, {4, "c", false}, {6, "c", true}, {5, "a", false},
	}
	for i, s := range steps {
		op := r.Do(RegOp{Write: true, Token: s.token, Holding: s.holder}, now)
		if op.OK != s.ok {
			t.Errorf("step %d: write(%d, %s) accepted=%v, want %v", i, s.token, s.holder, op.OK, s.ok)
		}
	}
	if st := r.Do(RegOp{}, now).State; st.Token != 6 || st.Holder != "c" {
		t.Errorf("state %+v, want token 6 by c", st)
	}
	if v := checkFence(r.Ops()); len(v) != 0 {
		t.Errorf("fence check on the register's own history: %v", v)
	}
}

func TestReportTable(t *testing.T) {
	h := history(held(0, 1, 100*ms, 200*ms), held(1, 1, 210*ms, 300*ms))
	f := Check(h, checkOpts)
	cfg := Config{URL: "redis://:secret@127.0.0.1:1/0", Workers: 2, Duration: time.Second, TTL: 500 * time.Millisecond, Seed: 7}
	r := newReport(cfg, h, f, checkOpts, map[string]int{FaultPause: 3})
	var b strings.Builder
	r.WriteTable(&b)
	out := b.String()
	for _, want := range []string{"duplicate-token", "FAIL", "--seed 7", "pause"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("table shows the password:\n%s", out)
	}
	var svg strings.Builder
	if err := r.WriteSVG(&svg); err != nil || !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "duplicate-token") {
		t.Errorf("SVG: %v\n%.300s", err, svg.String())
	}
}

// TestCrashAndInconclusive: a worker that crashed is a violation, and a
// run that granted nothing fails as inconclusive rather than passing.
func TestCrashAndInconclusive(t *testing.T) {
	h := &History{Start: 1, End: 10, Workers: []*Worker{
		{ID: "0.0", End: 5, Exit: 3, Crashed: true, Stderr: "panic: boom"},
		{ID: "1.0", End: 9, Killed: true},
	}}
	f := Check(h, CheckOptions{})
	if len(f.Violations) != 1 || f.Violations[0].Kind != VCrash || !strings.Contains(f.Violations[0].Detail, "panic: boom") {
		t.Errorf("violations %+v; want one worker-crash naming its output", f.Violations)
	}
	r := &Report{Operations: Operations{LockCalls: 12, LockErrors: 12}, Findings: Findings{Violations: []Violation{}}}
	if !r.Failed() || r.Inconclusive() == "" {
		t.Errorf("a run with no grant: Failed %v, Inconclusive %q; want a failure saying why", r.Failed(), r.Inconclusive())
	}
	var out strings.Builder
	r.WriteTable(&out)
	if !strings.Contains(out.String(), "INCONCLUSIVE: no lock was granted") {
		t.Errorf("report:\n%s\nwant an INCONCLUSIVE verdict", out.String())
	}
	r.Operations.Grants = 1
	if r.Failed() {
		t.Error("a run with a grant and no violation failed")
	}
}

// TestFaultNeverInjectedFailsTheRun: a run that asked for a fault class and
// never injected one of its faults tested nothing of it, so it must fail
// as inconclusive, however clean its history.
func TestFaultNeverInjectedFailsTheRun(t *testing.T) {
	h := history(held(0, 1, 100*ms, 200*ms), held(1, 2, 210*ms, 300*ms))
	f := Check(h, checkOpts)
	cfg := Config{URL: "redis://127.0.0.1:1/0", Workers: 2, Duration: time.Second, TTL: 500 * time.Millisecond, Seed: 7,
		Faults: []string{ClassPause, ClassCut, ClassServer}}
	// A blackhole is a cut fault; nothing of the server class happened.
	r := newReport(cfg, h, f, checkOpts, map[string]int{FaultPause: 2, FaultBlackhole: 1})
	if !r.Failed() {
		t.Fatal("a run that never injected a server fault it asked for passed")
	}
	why := r.Inconclusive()
	if !strings.Contains(why, "server") || strings.Contains(why, "cut") || strings.Contains(why, "pause") {
		t.Errorf("Inconclusive() = %q; want it to name the server faults alone", why)
	}
	var out strings.Builder
	r.WriteTable(&out)
	if !strings.Contains(out.String(), "INCONCLUSIVE") || !strings.Contains(out.String(), "server") {
		t.Errorf("report:\n%s\nwant an INCONCLUSIVE verdict naming the server faults", out.String())
	}

	r = newReport(cfg, h, f, checkOpts, map[string]int{FaultPause: 2, FaultCut: 1, FaultServerRestart: 1})
	if r.Failed() {
		t.Errorf("a clean run that injected every class it asked for failed: %q", r.Inconclusive())
	}
	cfg.Faults = nil
	if r := newReport(cfg, h, f, checkOpts, nil); r.Failed() {
		t.Errorf("a clean run without faults, as asked, failed: %q", r.Inconclusive())
	}
}

// TestConnectionScopedExclusion: a connection-scoped lock (sqllock's
// lock=connection) ends the moment its holder's connection dies, so a
// grant after that is no overlap; the check must still find a grant made
// while the holder's connection was alive, or that only another worker's
// connection died.
func TestConnectionScopedExclusion(t *testing.T) {
	// a holds from 100ms with a lease to 600ms and never releases; b is
	// granted at 300ms.
	setup := func(f func(a *Holding, h *History)) func() *History {
		return func() *History {
			a := held(0, 1, 100*ms, 0)
			a.ReleaseStart, a.Released, a.Done, a.DoneErr = 0, 0, 350*ms, doneLost
			h := history(a, held(1, 2, 300*ms, 400*ms))
			f(a, h)
			return h
		}
	}
	cases := []struct {
		name  string
		h     func() *History
		lease []string // violations with a lease-scoped lock
		conn  []string // with a connection-scoped lock
	}{
		{"nothing happened to the holder's connection", setup(func(*Holding, *History) {}),
			[]string{VExclusion}, []string{VExclusion}},
		{"the holder was killed", setup(func(a *Holding, h *History) {
			a.Done, a.Killed = 0, 250*ms
			h.Faults = []Fault{{Kind: FaultKill, Target: a.Worker, Slot: 0, From: 250 * ms, To: 250 * ms}}
		}), []string{VExclusion}, nil},
		{"the holder was killed after the grant", setup(func(a *Holding, h *History) {
			a.Done, a.Killed = 0, 320*ms
			h.Faults = []Fault{{Kind: FaultKill, Target: a.Worker, Slot: 0, From: 320 * ms, To: 320 * ms}}
		}), []string{VExclusion}, []string{VExclusion}},
		{"the holder's connections were cut", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultCut, Slot: 0, From: 200 * ms, To: 800 * ms}}
		}), []string{VExclusion}, nil},
		{"the holder's connections were blackholed", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultBlackhole, Slot: 0, From: 200 * ms, To: 800 * ms}}
		}), []string{VExclusion}, nil},
		{"the server restarted", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultServerRestart, Slot: -1, From: 200 * ms, To: 280 * ms}}
		}), []string{VExclusion}, nil},
		{"only the other worker's connections were cut", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultCut, Slot: 1, From: 200 * ms, To: 280 * ms}}
		}), []string{VExclusion}, []string{VExclusion}},
		{"the cut came after the grant", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultCut, Slot: 0, From: 320 * ms, To: 800 * ms}}
		}), []string{VExclusion}, []string{VExclusion}},
		{"a cut over before the holding began", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultCut, Slot: 0, From: 20 * ms, To: 60 * ms}}
		}), []string{VExclusion}, []string{VExclusion}},
		{"the holder was paused", setup(func(a *Holding, h *History) {
			h.Faults = []Fault{{Kind: FaultPause, Slot: 0, From: 200 * ms, To: 800 * ms}}
		}), []string{VExclusion}, []string{VExclusion}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []struct {
				scoped bool
				want   []string
			}{{false, tc.lease}, {true, tc.conn}} {
				o := checkOpts
				o.ConnectionScoped = mode.scoped
				f := Check(tc.h(), o)
				if got := slices.DeleteFunc(kinds(f), func(k string) bool { return k == VStall }); !slices.Equal(got, mode.want) {
					t.Errorf("connection-scoped %v: violations %v, want %v", mode.scoped, got, mode.want)
					for _, v := range f.Violations {
						t.Logf("  %s: %s", v.Kind, v.Detail)
					}
				}
			}
		})
	}
}

func TestConnectionScopedURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://u@h:5432/db?sslmode=disable&lock=connection": true,
		"postgresql://u@h/db?lock=connection":                    true,
		"mysql://u:p@h:3306/db?lock=connection":                  true,
		"postgres://u@h/db?lock=table":                           false,
		"postgres://u@h/db":                                      false,
		"redis://h:6379/0?lock=connection":                       false,
		"sqlite:///tmp/x.db":                                     false,
	} {
		if got := connectionScoped(raw); got != want {
			t.Errorf("connectionScoped(%q) = %v, want %v", raw, got, want)
		}
	}
}
