package torture

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Holding is one lock holding as its worker reported it. Times are Unix
// nanoseconds (see the package doc); zero means "did not happen" or "not
// reported".
type Holding struct {
	ID     string `json:"id"`     // slot.incarnation.sequence
	Worker string `json:"worker"` // slot.incarnation
	Slot   int    `json:"slot"`
	Token  uint64 `json:"token"`
	// Slow: the holder ran without auto-refresh and slept past its TTL
	// before writing, the classic process pause of a careless client.
	Slow bool `json:"slow,omitempty"`
	// Attempt is when the Lock call that was granted started, Acquired
	// when it returned.
	Attempt  int64 `json:"attempt"`
	Acquired int64 `json:"acquired"`
	// ValidUntil is the latest lease deadline the holder reported.
	ValidUntil int64 `json:"valid_until"`
	// Done is when the holding's Done channel closed, DoneErr why
	// (released, lost, expired).
	Done    int64  `json:"done,omitempty"`
	DoneErr string `json:"done_err,omitempty"`
	// ReleaseStart and Released bracket the Unlock call.
	ReleaseStart int64  `json:"release_start,omitempty"`
	Released     int64  `json:"released,omitempty"`
	ReleaseErr   string `json:"release_err,omitempty"`
	// LastWrite is when the holder last sent a write.
	LastWrite int64 `json:"last_write,omitempty"`
	// Killed is when the holder's process was killed while it held the
	// lock (before Unlock returned).
	Killed int64 `json:"killed,omitempty"`
}

// validEnd is when the holding's lease certainly stopped being promised
// to it: its deadline, or the start of its release if that came first.
func (h *Holding) validEnd() int64 {
	end := h.ValidUntil
	if h.ReleaseStart != 0 && h.ReleaseStart < end {
		end = h.ReleaseStart
	}
	return end
}

// beliefEnd is when the holder stopped acting as the holder: when it began
// to release or saw Done close, whichever came first, or when it died; or
// later, if it still wrote after that.
func (h *Holding) beliefEnd(runEnd int64) int64 {
	end := h.ReleaseStart
	if h.Done != 0 && (end == 0 || h.Done < end) {
		end = h.Done
	}
	if end == 0 {
		end = h.Killed
	}
	if end == 0 {
		end = runEnd
	}
	return max(end, h.LastWrite)
}

// Span is an interval of time [From, To].
type Span struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Worker is one worker process (an incarnation of a worker slot: a
// killed worker is replaced by the next incarnation in its slot).
type Worker struct {
	ID     string `json:"id"`
	Slot   int    `json:"slot"`
	Inc    int    `json:"inc"`
	Pid    int    `json:"pid"`
	Start  int64  `json:"start"`
	End    int64  `json:"end,omitempty"`
	Killed bool   `json:"killed,omitempty"`
	// Crashed: the process exited although it was neither killed nor told
	// to stop, or exited with a failure when told to; Exit is its status
	// (-1: a signal the harness did not send).
	Crashed bool `json:"crashed,omitempty"`
	Exit    int  `json:"exit,omitempty"`
	// Stderr is the end of a crashed worker's error output.
	Stderr string `json:"stderr,omitempty"`
	// Waits are the Lock calls, from call to return.
	Waits []Span `json:"-"`
	// Errors counts Lock calls that failed (backend unreachable).
	Errors int `json:"errors,omitempty"`
	// FirstError is the first of them, for the report.
	FirstError string `json:"first_error,omitempty"`

	open    int64               // start of the current Lock call, or 0
	holding map[uint64]*Holding // by sequence number
	stderr  *tail
}

// Fault kinds.
const (
	FaultPause         = "pause"
	FaultKill          = "kill"
	FaultCut           = "cut"
	FaultBlackhole     = "blackhole"
	FaultServerPause   = "server-pause"
	FaultServerKill    = "server-kill"
	FaultServerRestart = "server-restart"
	FaultFailover      = "failover"       // a replica promoted on request
	FaultFailoverPause = "failover-pause" // the master paused until a replica was promoted
)

// Fault is one injected fault, from its start to its end (a kill ends at
// once; its replacement starts later).
type Fault struct {
	Kind   string `json:"kind"`
	Target string `json:"target"` // a worker id, or a server address
	Slot   int    `json:"slot"`   // the worker slot, or -1 for a server
	From   int64  `json:"from"`
	To     int64  `json:"to"`
}

// History is everything a run recorded.
type History struct {
	Start    int64      `json:"start"`
	End      int64      `json:"end"`
	TTL      int64      `json:"ttl_ns"`
	Holdings []*Holding `json:"holdings"`
	Workers  []*Worker  `json:"workers"`
	Faults   []Fault    `json:"faults"`
	Ops      []RegOp    `json:"register"`
}

// recorder builds a History from the workers' messages and the faults.
type recorder struct {
	mu      sync.Mutex
	h       History
	workers map[string]*Worker
}

func newRecorder(start time.Time, ttl time.Duration) *recorder {
	return &recorder{h: History{Start: start.UnixNano(), TTL: int64(ttl)}, workers: map[string]*Worker{}}
}

func workerID(slot, inc int) string { return fmt.Sprintf("%d.%d", slot, inc) }

// started records a new worker process.
func (r *recorder) started(slot, inc, pid int, at time.Time, stderr *tail) *Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &Worker{ID: workerID(slot, inc), Slot: slot, Inc: inc, Pid: pid, Start: at.UnixNano(),
		holding: map[uint64]*Holding{}, stderr: stderr}
	r.workers[w.ID] = w
	r.h.Workers = append(r.h.Workers, w)
	return w
}

// ended records that worker w's process is gone; killed says by a fault.
func (r *recorder) ended(w *Worker, at time.Time, killed, crashed bool, exit int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.End != 0 {
		return
	}
	t := at.UnixNano()
	w.End, w.Killed, w.Crashed, w.Exit = t, killed, crashed, exit
	if crashed && w.stderr != nil {
		w.Stderr = w.stderr.String()
	}
	if w.open != 0 {
		w.Waits = append(w.Waits, Span{w.open, t})
		w.open = 0
	}
	// A dead process holds nothing: its holdings end with it, so that the
	// checks do not take the lock for held (or released in time) after.
	if killed || crashed {
		for _, h := range w.holding {
			if h.Released == 0 && h.Killed == 0 {
				h.Killed = t
			}
		}
	}
}

// event records one message of worker w.
func (r *recorder) event(w *Worker, m msg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := w.holding[m.H]
	switch m.Kind {
	case msgAttempt:
		w.open = m.T
	case msgNotHeld:
		w.Errors++
		if w.FirstError == "" {
			w.FirstError = m.Err
		}
		r.closeWait(w, m.T)
	case msgAcquired:
		h = &Holding{ID: fmt.Sprintf("%s.%d", w.ID, m.H), Worker: w.ID, Slot: w.Slot, Token: m.Token,
			Slow: m.Slow, Attempt: w.open, Acquired: m.T, ValidUntil: m.VU}
		if h.Attempt == 0 {
			h.Attempt = m.T
		}
		r.closeWait(w, m.T)
		w.holding[m.H] = h
		r.h.Holdings = append(r.h.Holdings, h)
	}
	if h == nil {
		return
	}
	if m.VU > h.ValidUntil {
		h.ValidUntil = m.VU
	}
	switch m.Kind {
	case msgDone:
		h.Done, h.DoneErr = m.T, m.Err
	case msgRelease:
		h.ReleaseStart = m.T
	case msgReleased:
		h.Released, h.ReleaseErr = m.T, m.Err
	case msgWrite:
		h.LastWrite = m.T
	}
}

func (r *recorder) closeWait(w *Worker, t int64) {
	if w.open != 0 {
		w.Waits = append(w.Waits, Span{w.open, t})
		w.open = 0
	}
}

// fault records a fault and returns its index, to end it with faultEnded.
func (r *recorder) fault(f Fault) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Faults = append(r.h.Faults, f)
	return len(r.h.Faults) - 1
}

func (r *recorder) faultEnded(i int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Faults[i].To = at.UnixNano()
}

// holder returns the slot of a worker that holds the lock now, or -1.
func (r *recorder) holder() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.h.Workers {
		if w.End != 0 {
			continue
		}
		for _, h := range w.holding {
			if h.ReleaseStart == 0 && h.Done == 0 {
				return w.Slot
			}
		}
	}
	return -1
}

// finish closes the history at end and returns it with ops.
func (r *recorder) finish(end time.Time, ops []RegOp) *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.End = end.UnixNano()
	for i := range r.h.Faults {
		if r.h.Faults[i].To == 0 {
			r.h.Faults[i].To = r.h.End
		}
	}
	for _, w := range r.h.Workers {
		if w.open != 0 {
			w.Waits = append(w.Waits, Span{w.open, r.h.End})
			w.open = 0
		}
		if w.End == 0 {
			w.End = r.h.End
		}
	}
	r.h.Ops = ops
	slices.SortFunc(r.h.Holdings, func(a, b *Holding) int { return cmpInt(a.Acquired, b.Acquired) })
	h := r.h
	return &h
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// tail keeps the last bytes written to it, such as a worker's stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
