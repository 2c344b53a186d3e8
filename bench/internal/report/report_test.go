package report

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
	"github.com/distlock-go/distlock/bench/internal/scenario"
)

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
}

func TestDur(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{870 * time.Nanosecond, "870 ns"},
		{87400 * time.Nanosecond, "87.4 µs"},
		{1234 * time.Microsecond, "1.23 ms"},
		{4500 * time.Millisecond, "4.50 s"},
	} {
		if got := Dur(c.d); got != c.want {
			t.Errorf("Dur(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestDecade(t *testing.T) {
	for d, want := range map[float64]string{2: "100 ns", 4: "10 µs", 6: "1 ms", 9: "1 s", 10: "10 s"} {
		if got := decade(d); got != want {
			t.Errorf("decade(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestBreakdown(t *testing.T) {
	got := breakdown(map[string]float64{"set": 1, "evalsha": 2, "get": 1, "ping": 0.001})
	if want := "evalsha 2 · get 1 · set 1"; got != want {
		t.Errorf("breakdown = %q, want %q", got, want)
	}
}

// A database counts no server commands and has no round trip measured
// under load: its tables say so with a dash, not with a zero that reads as
// "no commands at all".
func TestUncountedFiguresAreDashes(t *testing.T) {
	u := scenario.Uncontended{Ops: 10, P50: time.Millisecond, P99: 2 * time.Millisecond, OpsPerSec: 900, AllocsPerOp: 20, BytesPerOp: 900}
	c := scenario.Contended{Elapsed: time.Second, Acquisitions: 100, AcqPerSec: 100, Handoffs: 90, HandoffsPerS: 90,
		HandoffMean: time.Millisecond, HandoffP99: time.Millisecond, WaitP50: time.Millisecond, WaitP99: time.Millisecond,
		WaitMax: time.Millisecond, HandedWaitP99: time.Millisecond, PerWorkerMin: 10, PerWorkerMax: 15}
	floor := Lib{Name: "floor: upsert + DELETE", Kind: locker.Floor, Role: locker.RoleLock}
	ours := Lib{Name: "distlock (sqllock)", Kind: locker.Ours}
	res := &Results{SQL: []SQLRows{{
		Database:  "PostgreSQL",
		Rows:      []UncontendedRow{{Lib: floor, Runs: []scenario.Uncontended{u}}, {Lib: ours, Runs: []scenario.Uncontended{u}}},
		Contended: []ContendedRow{{Lib: ours, Runs: []scenario.Contended{c}}},
	}}}
	md := string(Markdown(res, ""))
	_, sql, ok := strings.Cut(md, "### PostgreSQL")
	if !ok {
		t.Fatalf("no PostgreSQL section in:\n%s", md)
	}
	sql, _, _ = strings.Cut(sql, "\n## ")
	for _, line := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(line, "| **distlock") && !strings.HasPrefix(line, "| floor") {
			continue
		}
		if strings.Contains(line, "| 0.0 |") || strings.Contains(line, "| 0 ns |") || strings.Contains(line, "NaN") {
			t.Errorf("a figure not measured reads as a number: %s", line)
		}
	}
	if !strings.Contains(sql, "| 900 | 20.0 | 900 | – |") {
		t.Errorf("the uncontended row does not end with a dash for its commands:\n%s", sql)
	}
}

// The targets are judged on the run's medians: a figure past its limit is
// a miss with its cause, one within it is met, and a row the run lacks is
// not measured rather than met.
func TestRedisTargetsJudged(t *testing.T) {
	u := func(p50 time.Duration, cmds, allocs float64) []scenario.Uncontended {
		return []scenario.Uncontended{{Ops: 10, P50: p50, P99: p50, OpsPerSec: 1, AllocsPerOp: allocs, BytesPerOp: 1,
			Cmds: map[string]float64{"evalsha": cmds}}}
	}
	res := &Results{Single: []UncontendedRow{
		{Lib: Lib{Name: "floor: SET NX PX + DEL", Kind: locker.Floor, Role: locker.RoleLock}, Runs: u(100*time.Microsecond, 2, 12)},
		{Lib: Lib{Name: "bsm/redislock", Kind: locker.Peer}, Runs: u(110*time.Microsecond, 5, 33)},
		{Lib: Lib{Name: "distlock (redislock)", Kind: locker.Ours}, Runs: u(140*time.Microsecond, 6.03, 18)},
	}}
	md := string(Markdown(res, ""))
	_, sec, ok := strings.Cut(md, "### Against the targets")
	if !ok {
		t.Fatalf("no targets in:\n%s", md)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	for _, want := range []string{
		"| A: p50, one node | 140 µs | ≤ 1.15× 100 µs (floor: SET NX PX + DEL) | **no** |",
		"| A: p50, one node | 140 µs | ≤ 1.05× 110 µs (bsm/redislock) | **no** |",
		"| A: server commands per acquire+release | 6.03 | ≤ 6.00 | **no** |",
		"| A: allocations per acquire+release | 18.0 | ≤ 21.0 | yes |",
		"| B: p50, five nodes | – | – | not measured |",
		"- **A: p50, one node**: Two Lua scripts",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("targets lack %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "A: allocations per acquire+release**:") {
		t.Errorf("a met target is given a cause:\n%s", sec)
	}
}
