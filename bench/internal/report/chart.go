package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// Chart draws the contended scenario's handoff latency (mean and p99) and
// wait p99 per library as horizontal bars on a logarithmic time axis, as a
// self-contained SVG.
func Chart(res *Results) []byte {
	type series struct {
		label, color string
		get          func(contendedSummary) float64
	}
	ss := []series{
		{"handoff mean", "#4e79a7", func(c contendedSummary) float64 { return c.HandoffMean }},
		{"handoff p99", "#a0cbe8", func(c contendedSummary) float64 { return c.HandoffP99 }},
		{"wait p99", "#f28e2b", func(c contendedSummary) float64 { return c.WaitP99 }},
		{"wait max", "#ffbe7d", func(c contendedSummary) float64 { return c.WaitMax }},
	}
	var rows []contendedSummary
	for _, r := range res.Contended {
		if s := summarizeContended(r); s.N > 0 {
			rows = append(rows, s)
		}
	}

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, s := range ss {
			if v := s.get(r); v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1e4, 1e6
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}

	const (
		width, labelW, plotX0, plotX1 = 840.0, 200.0, 215.0, 715.0
		barH, barGap, groupGap        = 13.0, 3.0, 16.0
		top                           = 80.0
	)
	groupH := float64(len(ss))*(barH+barGap) + groupGap
	plotBottom := top + float64(len(rows))*groupH
	height := plotBottom + 44
	x := func(v float64) float64 {
		return plotX0 + (math.Log10(v)-dLo)/(dHi-dLo)*(plotX1-plotX0)
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	w(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	title := fmt.Sprintf("Contention: %d workers, one key — handoff latency and wait", res.Settings.Workers)
	w(`<text x="12" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", esc(title))
	sub := fmt.Sprintf("median of %d runs · log scale · lower is better", res.Settings.Reps)
	w(`<text x="%.1f" y="24" text-anchor="end" fill="#555">%s</text>`+"\n", width-12, esc(sub))
	lx := plotX0
	for _, s := range ss {
		w(`<rect x="%.1f" y="42" width="12" height="12" fill="%s"/><text x="%.1f" y="52">%s</text>`+"\n", lx, s.color, lx+16, esc(s.label))
		lx += 125
	}
	// Decade grid and axis labels.
	for d := dLo; d <= dHi; d++ {
		gx := x(math.Pow(10, d))
		w(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d0d0d0"/>`+"\n", gx, top-8, gx, plotBottom)
		w(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, plotBottom+16, esc(decade(d)))
	}
	w(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">time (log scale)</text>`+"\n", (plotX0+plotX1)/2, plotBottom+34)

	for i, r := range rows {
		gy := top + float64(i)*groupH
		weight := "normal"
		if r.Lib.Kind == locker.Ours {
			weight = "bold"
		}
		w(`<text x="%.1f" y="%.1f" text-anchor="end" font-weight="%s">%s</text>`+"\n",
			labelW, gy+float64(len(ss))*(barH+barGap)/2+4, weight, esc(r.Lib.Name))
		for j, s := range ss {
			by := gy + float64(j)*(barH+barGap)
			v := s.get(r)
			if v <= 0 {
				w(`<text x="%.1f" y="%.1f" fill="#555">%s: none</text>`+"\n", plotX0+4, by+barH-2, esc(s.label))
				continue
			}
			bw := math.Max(x(v)-plotX0, 1)
			w(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				plotX0, by, bw, barH, s.color, esc(r.Lib.Name), esc(s.label), esc(durNS(v)))
			w(`<text x="%.1f" y="%.1f" fill="#333">%s</text>`+"\n", plotX0+bw+4, by+barH-2, esc(durNS(v)))
		}
	}
	w(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555"/>`+"\n", plotX0, top-8, plotX0, plotBottom)
	w("</svg>\n")
	return b.Bytes()
}

// decade labels 10^d nanoseconds: "100 µs", "1 ms", "10 s".
func decade(d float64) string {
	units := []string{"ns", "µs", "ms", "s"}
	i := min(int(d)/3, len(units)-1)
	return fmt.Sprintf("%g %s", math.Pow(10, d-float64(3*i)), units[i])
}

var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace
