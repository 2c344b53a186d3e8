package scenario

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0.1, 1}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("percentile([7], 99) = %v", got)
	}
}

func TestPer(t *testing.T) {
	before := Counts{"set": 10, "get": 4}
	after := Counts{"set": 30, "get": 4, "del": 20}
	got := Per(before, after, 20)
	if len(got) != 2 || got["set"] != 1 || got["del"] != 1 {
		t.Errorf("Per = %v", got)
	}
	if Total(got) != 2 {
		t.Errorf("Total = %v", Total(got))
	}
}
