package redislock

import (
	"fmt"
	"testing"
)

func TestGivebacksBookkeeping(t *testing.T) {
	var g givebacks
	if got, _ := g.unsettled("k", "o"); got != 0 {
		t.Fatalf("empty set: unsettled %d; want 0", got)
	}
	g.note("k", "o", 7, "c7", false)
	if got, call := g.unsettled("k", "o"); got != 7 || call != "c7" {
		t.Fatalf("after an unsettled give-back of 7: %d, %q; want 7, c7", got, call)
	}
	if got, _ := g.unsettled("k", "other"); got != 0 {
		t.Errorf("another owner: unsettled %d; want 0", got)
	}
	g.note("k", "o", 6, "c6", true) // an older give-back settling leaves 7 unsettled
	if got, _ := g.unsettled("k", "o"); got != 7 {
		t.Errorf("after an older give-back settled: %d; want 7", got)
	}
	g.note("k", "o", 7, "c7", true)
	if got, _ := g.unsettled("k", "o"); got != 0 || g.n.Load() != 0 {
		t.Errorf("after it settled: unsettled %d, %d remembered; want 0, 0", got, g.n.Load())
	}
	g.note("k", "o", 8, "c8", false)
	g.forget("k", "o")
	if got, _ := g.unsettled("k", "o"); got != 0 {
		t.Errorf("after forget: unsettled %d; want 0", got)
	}
	for i := range givebackMax + 10 {
		g.note("k", fmt.Sprint(i), 1, "c1", false)
	}
	if n := int(g.n.Load()); n > givebackMax {
		t.Errorf("%d give-backs remembered; want at most %d", n, givebackMax)
	}
}
