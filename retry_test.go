package distlock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
)

func TestBackoffBounds(t *testing.T) {
	b := distlock.ExponentialBackoff(time.Millisecond, 8*time.Millisecond)
	for attempt, ceil := range map[int]time.Duration{1: 1, 2: 2, 3: 4, 4: 8, 10: 8} {
		ceil *= time.Millisecond
		for range 100 {
			if d := b.Next(attempt); d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, ceil/2, ceil)
			}
		}
	}
	var seen atomic.Int64
	c := distlock.ConstantBackoff(10 * time.Millisecond)
	for range 100 {
		seen.Store(int64(c.Next(1)))
		if d := time.Duration(seen.Load()); d < 5*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("constant: %v outside [5ms, 10ms]", d)
		}
	}
}
