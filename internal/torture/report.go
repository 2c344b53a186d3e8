package torture

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
)

// maxListed bounds the violations a report lists; the counts cover all.
const maxListed = 1000

// Report is the outcome of a run: what was done, what was injected, what
// the checks found. It is what --json writes.
type Report struct {
	Backend    string   `json:"backend"`
	Servers    string   `json:"servers,omitempty"`
	Workers    int      `json:"workers"`
	Duration   string   `json:"duration"`
	TTL        string   `json:"ttl"`
	Slack      string   `json:"slack"`
	StallLimit string   `json:"stall_limit"`
	Seed       uint64   `json:"seed"`
	Faults     []string `json:"faults"`
	// ConnectionScoped: the locks end with their holder's connection, and
	// the exclusion check knew it (see CheckOptions).
	ConnectionScoped bool `json:"connection_scoped,omitempty"`

	Operations  Operations     `json:"operations"`
	FaultCounts map[string]int `json:"faults_injected"`
	// FaultsMissing lists the classes the run asked for of which it
	// injected no fault: it tested nothing of them, and so fails.
	FaultsMissing   []string       `json:"faults_not_injected,omitempty"`
	ViolationCounts map[string]int `json:"violation_counts"`
	Violations      []Violation    `json:"violations"`
	Findings        Findings       `json:"findings"`
	DoneLatency     Percentiles    `json:"done_latency"`
	Notes           []string       `json:"notes,omitempty"`

	// History is the run's full history, for the timeline.
	History *History `json:"history"`
}

// Operations counts what the workers did.
type Operations struct {
	LockCalls      int `json:"lock_calls"`
	Grants         int `json:"grants"`
	LockErrors     int `json:"lock_errors"`
	Reads          int `json:"reads"`
	Writes         int `json:"writes"`
	WritesAccepted int `json:"writes_accepted"`
	WritesRejected int `json:"writes_rejected"`
	LateWrites     int `json:"late_writes"` // sent after the writer's Done closed
	Processes      int `json:"worker_processes"`
	LostOnUnlock   int `json:"lost_on_unlock"` // Unlock said the lease had ended
}

// Percentiles summarises durations, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func percentiles(ns []int64) Percentiles {
	if len(ns) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i]) / 1e6
	}
	return Percentiles{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: float64(s[len(s)-1]) / 1e6}
}

func newReport(cfg Config, h *History, f Findings, o CheckOptions, faults map[string]int) *Report {
	r := &Report{
		Backend:          redact(cfg.URL),
		Workers:          cfg.Workers,
		Duration:         cfg.Duration.String(),
		TTL:              cfg.TTL.String(),
		Slack:            cfg.Slack.String(),
		StallLimit:       o.StallLimit.String(),
		Seed:             cfg.Seed,
		Faults:           cfg.Faults,
		ConnectionScoped: o.ConnectionScoped,
		FaultCounts:      faults,
		ViolationCounts:  map[string]int{},
		Findings:         f,
		DoneLatency:      percentiles(f.DoneLatency),
		History:          h,
	}
	for _, k := range ViolationKinds {
		r.ViolationCounts[k] = 0
	}
	for _, v := range f.Violations {
		r.ViolationCounts[v.Kind]++
	}
	for _, class := range cfg.Faults {
		injected := false
		for kind, n := range faults {
			injected = injected || n > 0 && classOf(kind) == class
		}
		if !injected {
			r.FaultsMissing = append(r.FaultsMissing, class)
		}
	}
	r.Violations = f.Violations[:min(len(f.Violations), maxListed)]
	if r.Violations == nil {
		r.Violations = []Violation{}
	}
	op := &r.Operations
	op.Grants = len(h.Holdings)
	op.Processes = len(h.Workers)
	for _, w := range h.Workers {
		op.LockCalls += len(w.Waits)
		op.LockErrors += w.Errors
	}
	for _, hd := range h.Holdings {
		if hd.ReleaseErr != "" {
			op.LostOnUnlock++
		}
	}
	for _, x := range h.Ops {
		switch {
		case !x.Write:
			op.Reads++
		case x.OK:
			op.Writes++
			op.WritesAccepted++
		default:
			op.Writes++
			op.WritesRejected++
		}
		if x.Write && x.Late {
			op.LateWrites++
		}
	}
	return r
}

// redact hides a password in a URL.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// Failed reports whether the run found any violation, or proved less than
// it was asked to (see Inconclusive).
func (r *Report) Failed() bool { return len(r.Findings.Violations) > 0 || r.Inconclusive() != "" }

// Inconclusive says why a run, violations or not, proves less than it was
// asked to, or returns "": no lock was granted, so nothing was checked; or
// a fault class it asked for was never injected, so nothing was checked
// under that fault.
func (r *Report) Inconclusive() string {
	var why []string
	if r.Operations.Grants == 0 {
		why = append(why, fmt.Sprintf("no lock was granted in %d Lock calls (%d failed): nothing was checked", r.Operations.LockCalls, r.Operations.LockErrors))
	}
	if len(r.FaultsMissing) > 0 {
		why = append(why, fmt.Sprintf("no %s fault was injected, though asked for: nothing was checked under it (run longer, or ask for fewer faults)",
			strings.Join(r.FaultsMissing, " or ")))
	}
	return strings.Join(why, "; ")
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as a short table for people.
func (r *Report) WriteTable(w io.Writer) {
	servers := ""
	if r.Servers != "" {
		servers = " (own servers: " + r.Servers + ")"
	}
	faults := strings.Join(r.Faults, ",")
	if faults == "" {
		faults = "none"
	}
	scope := ""
	if r.ConnectionScoped {
		scope = " (locks end with their holder's connection)"
	}
	fmt.Fprintf(w, "distlock torture: %s%s%s\n%d workers, %s, TTL %s, faults %s, seed %d\n\n",
		r.Backend, servers, scope, r.Workers, r.Duration, r.TTL, faults, r.Seed)

	row := func(name string, n int, note string) {
		if note != "" {
			note = "   " + note
		}
		fmt.Fprintf(w, "  %-26s %7d%s\n", name, n, note)
	}
	op := r.Operations
	fmt.Fprintln(w, "Operations")
	row("lock grants", op.Grants, fmt.Sprintf("(of %d Lock calls; %d failed)", op.LockCalls, op.LockErrors))
	row("writes accepted", op.WritesAccepted, "")
	row("writes rejected (stale)", op.WritesRejected, "")
	row("writes after Done closed", op.LateWrites, fmt.Sprintf("(%d of them accepted: nothing newer yet)", r.Findings.LateAccepted))
	row("worker processes", op.Processes, "")

	fmt.Fprintln(w, "Faults injected")
	kinds := make([]string, 0, len(r.FaultCounts))
	for k := range r.FaultCounts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	if len(kinds) == 0 && len(r.FaultsMissing) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, k := range kinds {
		row(k, r.FaultCounts[k], "")
	}
	for _, class := range r.FaultsMissing {
		row(class, 0, "(asked for, never injected)")
	}

	fmt.Fprintln(w, "Violations")
	for _, k := range ViolationKinds {
		note := ""
		if k == VLinearizability {
			switch r.Findings.Linearizable {
			case "":
				note = "(not checked)"
			default:
				note = "(porcupine: " + r.Findings.Linearizable + ")"
			}
		}
		row(k, r.ViolationCounts[k], note)
	}

	d := r.DoneLatency
	fmt.Fprintf(w, "\nDone after ValidUntil, leases that ran out (n=%d): p50 %.1fms  p90 %.1fms  p99 %.1fms  max %.1fms  (slack %s",
		d.N, d.P50, d.P90, d.P99, d.Max, r.Slack)
	if r.Findings.DonePaused > 0 {
		fmt.Fprintf(w, "; %d more ran out while their holder was paused", r.Findings.DonePaused)
	}
	fmt.Fprintln(w, ")")
	if r.Findings.LateGrants > 0 {
		fmt.Fprintf(w, "Grants whose reply came after their own deadline (Done closed at once): %d\n", r.Findings.LateGrants)
	}
	fmt.Fprintf(w, "Believed-held windows that overlapped: %d (expected under pauses; the fence rejected %d stale writes)\n",
		r.Findings.Overlaps, op.WritesRejected)
	fmt.Fprintf(w, "Longest time the lock was free while a healthy worker asked: %v (limit %s)\n",
		r.Findings.LongestFree.Round(time.Millisecond), r.StallLimit)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}

	if !r.Failed() {
		fmt.Fprintf(w, "\nPASS: no violation in %d holdings. Replay the fault schedule with --seed %d.\n", op.Grants, r.Seed)
		return
	}
	if len(r.Findings.Violations) == 0 {
		fmt.Fprintf(w, "\nINCONCLUSIVE: %s. Replay the fault schedule with --seed %d.\n", r.Inconclusive(), r.Seed)
		return
	}
	fmt.Fprintf(w, "\nFAIL: %d violations in %d holdings. Replay the fault schedule with --seed %d.\n",
		len(r.Findings.Violations), op.Grants, r.Seed)
	if why := r.Inconclusive(); why != "" {
		fmt.Fprintf(w, "  Also INCONCLUSIVE: %s.\n", why)
	}
	start := int64(0)
	if r.History != nil {
		start = r.History.Start
	}
	for i, v := range r.Findings.Violations {
		if i == 10 {
			fmt.Fprintf(w, "  ... and %d more (see --json)\n", len(r.Findings.Violations)-i)
			break
		}
		fmt.Fprintf(w, "  %8s  %-16s %s\n", time.Duration(v.At-start).Round(time.Millisecond), v.Kind, v.Detail)
	}
}
