package report

import (
	"bytes"
	"fmt"
	"math"

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
				line += fmt.Sprintf(" and %s the best peer's (%s, %s); %.1f allocations per operation against %.1f", times(r.P50, peer.P50),
					peer.Lib.Name, durNS(peer.P50), r.AllocsPerOp, peer.AllocsPerOp)
			} else if r.Lib.Kind == locker.Peer {
				line += " (the fastest peer)"
			}
			lines = append(lines, line+".")
		}
	}
	var bestWait *contendedSummary
	for i, r := range contended {
		if r.N > 0 && r.Lib.Kind == locker.Peer && (bestWait == nil || r.WaitP99 < bestWait.WaitP99) {
			bestWait = &contended[i]
		}
	}
	for _, r := range contended {
		if r.N == 0 || (r.Lib.Kind != locker.Ours && r.Lib.Name != nameOf(bestWait)) {
			continue
		}
		line := fmt.Sprintf("Contended: %s hands the lock over in %s on average, with a wait p99 of %s", bold(r.Lib), durNS(r.HandoffMean), durNS(r.WaitP99))
		if r.Lib.Kind == locker.Ours && bestWait != nil {
			line += fmt.Sprintf(" (%s the best peer's, %s: %s)", times(r.WaitP99, bestWait.WaitP99), bestWait.Lib.Name, durNS(bestWait.WaitP99))
		} else {
			line += " (the lowest wait p99 among the peers)"
		}
		line += fmt.Sprintf("; %d give-ups", r.GiveUps)
		lines = append(lines, line+".")
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

func nameOf(c *contendedSummary) string {
	if c == nil {
		return ""
	}
	return c.Lib.Name
}

func bold(l Lib) string { return "**" + l.Name + "**" }

func times(x, ref float64) string {
	if math.IsNaN(x) || math.IsNaN(ref) || ref == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/ref)
}
