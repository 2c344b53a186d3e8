package etcdlock

import "testing"

// TestDeadlinePhases walks a deadline through its transitions and checks
// the phase each one leaves it in.
func TestDeadlinePhases(t *testing.T) {
	l := &lease{lost: make(chan struct{})}
	d := &deadline{}
	step := func(what string, want phase) {
		t.Helper()
		if got := d.phaseLocked(); got != want {
			t.Fatalf("after %s: phase %d; want %d", what, got, want)
		}
	}
	step("arm", phaseArmed)
	d.rev = 7
	step("place", phaseInLine)
	d.place, d.turn, d.behind = l, 7, 7
	lost := d.holdLocked(l)
	step("hold", phaseHolding)
	if d.place != nil || d.turn != 0 || d.behind != 0 {
		t.Errorf("hold kept the waiter's place, turn or behind: %+v", d)
	}
	if again := d.holdLocked(l); again != lost {
		t.Error("hold on the same lease made a new Grant.Lost")
	}
	d.endLocked()
	step("end", phaseEnded)
	if !closed(d.lost) {
		t.Error("end left Grant.Lost open")
	}
	if d.holdLocked(l) == lost {
		t.Error("hold after end kept the closed Grant.Lost")
	}
	step("hold again", phaseHolding)
	ended := &lease{lost: make(chan struct{}), dead: true}
	d.holdLocked(ended)
	step("hold on a lease that ended", phaseEnded)
	d.vanishLocked()
	step("vanish", phaseArmed)
	if d.rev != 0 || d.on != nil || d.lost != nil {
		t.Errorf("vanish kept the key's revision or leases: %+v", d)
	}
	d.lapsing = make(chan struct{})
	step("lapse", phaseLapsing)
}
