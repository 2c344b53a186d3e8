package report

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/distlock-go/distlock/bench/internal/scenario"
)

// median returns the median of xs (the mean of the middle two for an even
// count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianOf[T any](runs []T, f func(T) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return median(xs)
}

func medianCmds(maps []map[string]float64) map[string]float64 {
	names := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			names[k] = true
		}
	}
	out := map[string]float64{}
	for k := range names {
		out[k] = medianOf(maps, func(m map[string]float64) float64 { return m[k] })
	}
	return out
}

// uncontendedSummary is the median of each figure over the repetitions.
type uncontendedSummary struct {
	Lib                     Lib
	N                       int // successful repetitions
	Errors                  []string
	P50, P99                float64 // nanoseconds
	OpsPerSec               float64
	AllocsPerOp, BytesPerOp float64
	CmdsPerOp               float64
	Cmds                    map[string]float64
}

func summarizeUncontended(row UncontendedRow) uncontendedSummary {
	r := row.Runs
	cm := make([]map[string]float64, len(r))
	for i := range r {
		cm[i] = r[i].Cmds
	}
	return uncontendedSummary{
		Lib: row.Lib, N: len(r), Errors: row.Errors,
		P50:         medianOf(r, func(u scenario.Uncontended) float64 { return float64(u.P50) }),
		P99:         medianOf(r, func(u scenario.Uncontended) float64 { return float64(u.P99) }),
		OpsPerSec:   medianOf(r, func(u scenario.Uncontended) float64 { return u.OpsPerSec }),
		AllocsPerOp: medianOf(r, func(u scenario.Uncontended) float64 { return u.AllocsPerOp }),
		BytesPerOp:  medianOf(r, func(u scenario.Uncontended) float64 { return u.BytesPerOp }),
		CmdsPerOp:   medianOf(r, func(u scenario.Uncontended) float64 { return scenario.Total(u.Cmds) }),
		Cmds:        medianCmds(cm),
	}
}

// contendedSummary is the median of each figure over the repetitions,
// except the safety counters (give-ups, overlaps, lost updates), which are
// totals over all repetitions: one is one too many.
type contendedSummary struct {
	Lib                       Lib
	N                         int
	Errors                    []string
	AcqPerSec, HandoffsPerSec float64
	HandoffMean, HandoffP99   float64
	WaitP50, WaitP99, WaitMax float64
	HandedWaitP99             float64
	RTT                       float64 // round trip under the run's load
	Reacquired                float64
	PerWorkerMin              float64
	PerWorkerMax              float64
	CmdsPerAcq                float64
	Cmds                      map[string]float64
	GiveUps                   int
	Overlaps, LostUpdates     int
	FirstErr                  string
}

func summarizeContended(row ContendedRow) contendedSummary {
	r := row.Runs
	type c = scenario.Contended
	cm := make([]map[string]float64, len(r))
	s := contendedSummary{
		Lib: row.Lib, N: len(r), Errors: row.Errors,
		AcqPerSec:      medianOf(r, func(x c) float64 { return x.AcqPerSec }),
		HandoffsPerSec: medianOf(r, func(x c) float64 { return x.HandoffsPerS }),
		HandoffMean:    medianOf(r, func(x c) float64 { return float64(x.HandoffMean) }),
		HandoffP99:     medianOf(r, func(x c) float64 { return float64(x.HandoffP99) }),
		WaitP50:        medianOf(r, func(x c) float64 { return float64(x.WaitP50) }),
		WaitP99:        medianOf(r, func(x c) float64 { return float64(x.WaitP99) }),
		WaitMax:        medianOf(r, func(x c) float64 { return float64(x.WaitMax) }),
		HandedWaitP99:  medianOf(r, func(x c) float64 { return float64(x.HandedWaitP99) }),
		RTT:            medianOf(r, func(x c) float64 { return float64(x.RTT) }),
		Reacquired:     medianOf(r, func(x c) float64 { return x.Reacquired }),
		PerWorkerMin:   medianOf(r, func(x c) float64 { return float64(x.PerWorkerMin) }),
		PerWorkerMax:   medianOf(r, func(x c) float64 { return float64(x.PerWorkerMax) }),
		CmdsPerAcq:     medianOf(r, func(x c) float64 { return scenario.Total(x.Cmds) }),
	}
	for i, x := range r {
		cm[i] = x.Cmds
		s.GiveUps += x.GiveUps
		s.Overlaps += x.Overlaps
		s.LostUpdates += x.LostUpdates
		if s.FirstErr == "" {
			s.FirstErr = x.FirstErr
		}
	}
	s.Cmds = medianCmds(cm)
	return s
}

// Dur formats a duration with three significant digits: "87.4 µs",
// "1.23 ms", "4.50 s".
func Dur(d time.Duration) string { return durNS(float64(d)) }

func durNS(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "–"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return sig3(ns/1e3) + " µs"
	case ns < 1e9:
		return sig3(ns/1e6) + " ms"
	default:
		return sig3(ns/1e9) + " s"
	}
}

// sig3 prints x (>= 1) with three significant digits.
func sig3(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}
