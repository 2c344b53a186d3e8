package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// highlights writes a few sentences computed from the figures: where each
// contender stands against the floor and the best peer.
func highlights(b *bytes.Buffer, single, redlock []uncontendedSummary, contended []contendedSummary) {
	var lines []string
	for _, sc := range []struct {
		what string
		rows []uncontendedSummary
	}{{"Uncontended, one node", single}, {"Uncontended, Redlock on five nodes", redlock}} {
		floor, peer := uncontendedRefs(sc.rows)
		for _, r := range sc.rows {
			if r.N == 0 || (r.Lib.Kind != locker.Ours && (peer == nil || r.Lib.Name != peer.Lib.Name)) {
				continue
			}
			line := fmt.Sprintf("%s: %s takes %s (p50) per acquire+release", sc.what, bold(r.Lib), durNS(r.P50))
			if floor != nil {
				line += fmt.Sprintf(", %s the floor's %s", times(r.P50, floor.P50), durNS(floor.P50))
			}
			if r.Lib.Kind == locker.Ours && peer != nil {
				line += fmt.Sprintf(" and %s the best peer's (%s, %s)", times(r.P50, peer.P50), peer.Lib.Name, durNS(peer.P50))
				if a := fewestAllocs(sc.rows); a != nil {
					line += fmt.Sprintf("; %.1f allocations per operation, %s the fewest of a peer (%s, %.1f)",
						r.AllocsPerOp, times(r.AllocsPerOp, a.AllocsPerOp), a.Lib.Name, a.AllocsPerOp)
				}
			} else if r.Lib.Kind == locker.Peer {
				line += " (the fastest peer)"
			}
			lines = append(lines, line+".")
		}
	}
	lowest := func(get func(contendedSummary) float64) *contendedSummary {
		var b *contendedSummary
		for i, r := range contended {
			if r.N > 0 && r.Lib.Kind == locker.Peer && (b == nil || get(r) < get(*b)) {
				b = &contended[i]
			}
		}
		return b
	}
	type fig struct {
		name string
		get  func(contendedSummary) float64
	}
	figs := []fig{
		{"handoff mean", func(c contendedSummary) float64 { return c.HandoffMean }},
		{"wait p99", func(c contendedSummary) float64 { return c.WaitP99 }},
		{"wait p99 of handoffs", func(c contendedSummary) float64 { return c.HandedWaitP99 }},
		{"wait max", func(c contendedSummary) float64 { return c.WaitMax }},
	}
	ours := false
	for _, r := range contended {
		if r.N == 0 || r.Lib.Kind != locker.Ours {
			continue
		}
		ours = true
		line := fmt.Sprintf("Contended: %s", bold(r.Lib))
		for i, f := range figs {
			sep := ","
			if i == 0 {
				sep = ""
			}
			line += fmt.Sprintf("%s %s %s", sep, f.name, durNS(f.get(r)))
			if p := lowest(f.get); p != nil {
				line += fmt.Sprintf(" (%s the best peer's, %s)", times(f.get(r), f.get(*p)), p.Lib.Name)
			}
		}
		line += fmt.Sprintf("; %.0f%% re-acquired by the last holder, %d give-ups", 100*r.Reacquired, r.GiveUps)
		lines = append(lines, line+".")
	}
	if !ours {
		var parts []string
		for _, f := range figs {
			if p := lowest(f.get); p != nil {
				parts = append(parts, fmt.Sprintf("lowest %s: %s (%s)", f.name, p.Lib.Name, durNS(f.get(*p))))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, "Contended, among the peers: "+strings.Join(parts, "; ")+".")
		}
	}
	for _, r := range contended {
		if r.Overlaps > 0 || r.LostUpdates > 0 {
			lines = append(lines, fmt.Sprintf("**Mutual exclusion broken** for %s: %d overlapping holders, %d lost updates.", r.Lib.Name, r.Overlaps, r.LostUpdates))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("## At a glance\n\n")
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", l)
	}
	b.WriteString("\n")
}

// uncontendedRefs returns the lock floor and the peer with the lowest p50.
func uncontendedRefs(rows []uncontendedSummary) (floor, peer *uncontendedSummary) {
	for i, r := range rows {
		if r.N == 0 {
			continue
		}
		if r.Lib.Role == locker.RoleLock {
			floor = &rows[i]
		}
		if r.Lib.Kind == locker.Peer && (peer == nil || r.P50 < peer.P50) {
			peer = &rows[i]
		}
	}
	return floor, peer
}

func fewestAllocs(rows []uncontendedSummary) *uncontendedSummary {
	var a *uncontendedSummary
	for i, r := range rows {
		if r.N > 0 && r.Lib.Kind == locker.Peer && (a == nil || r.AllocsPerOp < a.AllocsPerOp) {
			a = &rows[i]
		}
	}
	return a
}

func bold(l Lib) string { return "**" + l.Name + "**" }

func times(x, ref float64) string {
	if math.IsNaN(x) || math.IsNaN(ref) || ref == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/ref)
}
