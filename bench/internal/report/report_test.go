package report

import (
	"math"
	"testing"
	"time"
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
