package torture

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// Timeline geometry, in SVG user units.
const (
	tlWidth  = 1400
	tlLeft   = 90 // room for row labels
	tlRight  = 20
	tlTop    = 50
	tlRow    = 22
	tlBar    = 14
	tlLegend = 60
)

// WriteSVG draws the run as an SVG picture: one row per worker slot with
// its holdings as bars (solid while the lease was valid, orange while the
// holder still believed it held after that), pauses as grey bands, cuts as
// purple bands, kills as black crosses and rejected writes as red ticks; a
// row for server faults; violations as red marks on top.
func (r *Report) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.svg(bw)
	return bw.Flush()
}

// WriteHTML writes the SVG timeline inside an HTML page with the table.
func (r *Report) WriteHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>distlock torture: %s</title></head>\n<body style=\"font-family:sans-serif\">\n",
		html.EscapeString(r.Backend))
	r.svg(bw)
	fmt.Fprint(bw, "\n<pre>")
	var table strings.Builder
	r.WriteTable(&table)
	fmt.Fprint(bw, html.EscapeString(table.String()))
	fmt.Fprint(bw, "</pre>\n</body></html>\n")
	return bw.Flush()
}

func (r *Report) svg(w io.Writer) {
	h := r.History
	if h == nil {
		h = &History{}
	}
	rows := r.Workers + 1 // the last row is for the servers
	height := tlTop + rows*tlRow + tlLegend
	span := max(h.End-h.Start, 1)
	x := func(t int64) float64 {
		t = min(max(t, h.Start), h.End)
		return tlLeft + float64(t-h.Start)*float64(tlWidth-tlLeft-tlRight)/float64(span)
	}
	y := func(slot int) float64 { return float64(tlTop + slot*tlRow) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		tlWidth, height, tlWidth, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", tlWidth, height)
	verdict := "PASS"
	switch {
	case len(r.Findings.Violations) > 0:
		verdict = fmt.Sprintf("FAIL: %d violations", len(r.Findings.Violations))
	case r.Failed():
		verdict = "INCONCLUSIVE: no lock was granted"
	}
	fmt.Fprintf(w, `<text x="%d" y="16" font-size="13">distlock torture: %s, %d workers, %s, TTL %s, seed %d — %s</text>`+"\n",
		tlLeft, html.EscapeString(r.Backend), r.Workers, r.Duration, r.TTL, r.Seed, verdict)

	// Time axis: a tick per second, or per ten seconds for long runs.
	step := int64(time.Second)
	if span > int64(30*time.Second) {
		step = int64(10 * time.Second)
	}
	for t := int64(0); t <= span; t += step {
		xx := x(h.Start + t)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`, xx, tlTop-8, xx, tlTop+rows*tlRow)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%ds</text>`+"\n", xx, tlTop-12, t/int64(time.Second))
	}
	for i := range r.Workers {
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">worker %d</text>`+"\n", tlLeft-6, y(i)+tlBar-3, i)
	}
	fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">servers</text>`+"\n", tlLeft-6, y(r.Workers)+tlBar-3)

	// Faults under everything else.
	for _, f := range h.Faults {
		row := f.Slot
		if row < 0 {
			row = r.Workers
		}
		x0, x1 := x(f.From), max(x(f.To), x(f.From)+1)
		switch f.Kind {
		case FaultKill:
			xx, yy := x(f.From), y(row)
			fmt.Fprintf(w, `<path d="M%.1f %.1fl8 %dM%.1f %.1fl8 -%d" stroke="black" stroke-width="2"><title>kill %s</title></path>`+"\n",
				xx-4, yy, tlBar, xx-4, yy+tlBar, tlBar, f.Target)
		case FaultPause:
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#bbb"><title>pause %s, %v</title></rect>`+"\n",
				x0, y(row)-3, x1-x0, tlBar+6, f.Target, time.Duration(f.To-f.From).Round(time.Millisecond))
		case FaultCut, FaultBlackhole:
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="4" fill="#a4c"><title>%s %s, %v</title></rect>`+"\n",
				x0, y(row)+tlBar, x1-x0, f.Kind, f.Target, time.Duration(f.To-f.From).Round(time.Millisecond))
		default:
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#e88"><title>%s %s, %v</title></rect>`+"\n",
				x0, y(row), x1-x0, tlBar, f.Kind, f.Target, time.Duration(f.To-f.From).Round(time.Millisecond))
		}
	}
	for _, hd := range h.Holdings {
		x0, xv, xb := x(hd.Acquired), x(hd.validEnd()), x(hd.beliefEnd(h.End))
		xv = min(max(xv, x0), xb)
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.2f" height="%d" fill="#4a7fd0"><title>%s token %d</title></rect>`,
			x0, y(hd.Slot), max(xv-x0, 0.5), tlBar, hd.ID, hd.Token)
		if xb > xv+0.2 {
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.2f" height="%d" fill="#f0a030"><title>%s believed held after its lease</title></rect>`,
				xv, y(hd.Slot), xb-xv, tlBar, hd.ID)
		}
		fmt.Fprintln(w)
	}
	slotOf := map[string]int{}
	for _, wk := range h.Workers {
		slotOf[wk.ID] = wk.Slot
	}
	for _, op := range h.Ops {
		if op.Write && !op.OK {
			xx := x(op.Call)
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red" stroke-width="2"><title>write by %s with token %d rejected</title></line>`+"\n",
				xx, y(slotOf[op.Worker])-4, xx, y(slotOf[op.Worker])+tlBar+4, op.Holding, op.Token)
		}
	}
	for _, v := range r.Findings.Violations {
		xx := x(v.At)
		fmt.Fprintf(w, `<path d="M%.1f %dl-5 -9h10z" fill="red"><title>%s: %s</title></path>`+"\n",
			xx, tlTop-2, v.Kind, html.EscapeString(v.Detail))
	}

	// Legend.
	ly := float64(tlTop + rows*tlRow + 20)
	items := []struct{ color, label string }{
		{"#4a7fd0", "holding, lease valid"}, {"#f0a030", "believed held after the lease"},
		{"#bbb", "paused"}, {"#a4c", "connection cut"}, {"#e88", "server fault"}, {"red", "write rejected / violation"},
	}
	lx := float64(tlLeft)
	for _, it := range items {
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			lx, ly, it.color, lx+16, ly+10, it.label)
		lx += 40 + float64(len(it.label))*6
	}
	fmt.Fprintf(w, `<path d="M%.1f %.1fl8 12M%.1f %.1fl8 -12" stroke="black" stroke-width="2"/><text x="%.1f" y="%.1f">worker killed</text>`+"\n",
		lx, ly, lx, ly+12, lx+14, ly+10)
	fmt.Fprintln(w, "</svg>")
}
