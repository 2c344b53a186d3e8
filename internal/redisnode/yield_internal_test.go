package redisnode

import (
	"testing"
	"time"
)

// TestYieldEnds: a yield holds while the lock's channel has heard nothing
// for this client, and ends once it has (its mark moved) or once YieldFor
// has passed; either end is final.
func TestYieldEnds(t *testing.T) {
	var y Yields
	if y.Any() {
		t.Fatal("a client that released nothing yields")
	}
	y.Start("a", 7, 3)
	y.Start("b", 8, 3)
	if token, left, ok := y.Active("a", 3); !ok || token != 7 || left <= 0 || left > YieldFor {
		t.Errorf("active(a) = %d, %v, %v; want token 7 and at most %v left", token, left, ok, YieldFor)
	}
	if _, _, ok := y.Active("a", 4); ok {
		t.Error("the yield outlived a message to this client")
	}
	if _, _, ok := y.Active("a", 3); ok {
		t.Error("a yield that ended came back")
	}
	if _, _, ok := y.Active("c", 3); ok {
		t.Error("the client yields on a lock it did not release")
	}
	y.m["b"] = yielding{token: 8, mark: 3, until: time.Now().Add(-time.Millisecond)}
	if _, _, ok := y.Active("b", 3); ok {
		t.Error("the yield outlived its time")
	}
	if y.Any() {
		t.Error("ended yields are still counted")
	}
}
