package redislock

import (
	"testing"
	"time"
)

// TestYieldEnds: a yield holds while the lock's channel has heard nothing
// for this client, and ends once it has (its mark moved) or once yieldFor
// has passed; either end is final.
func TestYieldEnds(t *testing.T) {
	var y yields
	if y.any() {
		t.Fatal("a client that released nothing yields")
	}
	y.start("a", 7, 3)
	y.start("b", 8, 3)
	if token, left, ok := y.active("a", 3); !ok || token != 7 || left <= 0 || left > yieldFor {
		t.Errorf("active(a) = %d, %v, %v; want token 7 and at most %v left", token, left, ok, yieldFor)
	}
	if _, _, ok := y.active("a", 4); ok {
		t.Error("the yield outlived a message to this client")
	}
	if _, _, ok := y.active("a", 3); ok {
		t.Error("a yield that ended came back")
	}
	if _, _, ok := y.active("c", 3); ok {
		t.Error("the client yields on a lock it did not release")
	}
	y.m["b"] = yielding{token: 8, mark: 3, until: time.Now().Add(-time.Millisecond)}
	if _, _, ok := y.active("b", 3); ok {
		t.Error("the yield outlived its time")
	}
	if y.any() {
		t.Error("ended yields are still counted")
	}
}
