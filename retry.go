package distlock

import (
	"math/rand/v2"
	"time"
)

// Backoff decides how long a waiting [Mutex.Lock] sleeps between attempts
// when it cannot be woken by the backend, or as a safety net when it can.
// Next is called with attempt = 1, 2, 3, ... and returns the delay before
// that attempt. distlock never sleeps longer than the holder's remaining
// lease, when the backend reports it.
type Backoff interface {
	Next(attempt int) time.Duration
}

// BackoffFunc adapts a function to [Backoff].
type BackoffFunc func(attempt int) time.Duration

// Next calls f(attempt).
func (f BackoffFunc) Next(attempt int) time.Duration { return f(attempt) }

// ExponentialBackoff doubles the delay from minDelay up to maxDelay and
// applies "equal jitter": the delay is uniform in [d/2, d]. Jitter spreads
// waiters that woke together, so they do not retry in lockstep.
func ExponentialBackoff(minDelay, maxDelay time.Duration) Backoff {
	if minDelay <= 0 {
		minDelay = time.Millisecond
	}
	if maxDelay < minDelay {
		maxDelay = minDelay
	}
	return BackoffFunc(func(attempt int) time.Duration {
		d := minDelay
		for i := 1; i < attempt && d < maxDelay; i++ {
			d *= 2
		}
		return jitter(min(d, maxDelay))
	})
}

// ConstantBackoff waits d between attempts, with jitter in [d/2, d].
func ConstantBackoff(d time.Duration) Backoff {
	if d <= 0 {
		d = time.Millisecond
	}
	return BackoffFunc(func(int) time.Duration { return jitter(d) })
}

// jitter returns a duration uniform in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
