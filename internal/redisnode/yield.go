package redisnode

import (
	"sync"
	"sync/atomic"
	"time"
)

// A client that releases a plain lock and wakes another client's waiter
// by name yields to it for a moment: its own attempts on the lock,
// meanwhile, would take the lock back before the woken waiter can ask. The
// release tells the client so ([ReleaseAs]), and the client keeps the
// yield itself, in its backend's [Yields] (redislock's, and Redlock's for
// its gate node), so that the release writes nothing for it: an attempt
// that yields ([Yielding]) enlists the client (the woken waiter's release
// then wakes it) and is refused, without reading the lock (see
// acquire.lua). The yield ends after YieldFor, or as soon as the lock's
// channel carries a message for this client (its mark moves): the lock
// then is free again for it, or held by someone it must wait for anyway.
const YieldFor = 20 * time.Millisecond

// yieldsSwept is how many yields are kept before the lapsed ones are
// dropped: a client yields on the few locks it passes on at once.
const yieldsSwept = 64

// Yields are the locks a client yields on, by channel. It is empty unless
// the client passes locks on; an attempt then costs one atomic load. The
// zero value is ready to use.
type Yields struct {
	n  atomic.Int32 // len(m)
	mu sync.Mutex
	m  map[string]yielding
}

type yielding struct {
	token uint64 // of the lease released
	mark  uint64 // of the channel after the release (0: not live)
	until time.Time
}

// Start records a yield on the lock of channel ch, whose lease of token
// this client released, the channel's mark ([Notifier.Mark]) being mark
// before the release was sent.
func (y *Yields) Start(ch string, token, mark uint64) {
	now := time.Now()
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.m == nil {
		y.m = make(map[string]yielding)
	}
	if len(y.m) >= yieldsSwept {
		for c, e := range y.m {
			if !now.Before(e.until) {
				delete(y.m, c)
			}
		}
	}
	y.m[ch] = yielding{token: token, mark: mark, until: now.Add(YieldFor)}
	y.n.Store(int32(len(y.m)))
}

// Any reports whether the client may yield on some lock.
func (y *Yields) Any() bool { return y.n.Load() > 0 }

// Active returns the token of the lease released and how much longer the
// yield on the lock of channel ch lasts, the channel's mark being mark
// now; false when the client does not yield there.
func (y *Yields) Active(ch string, mark uint64) (uint64, time.Duration, bool) {
	y.mu.Lock()
	defer y.mu.Unlock()
	e, ok := y.m[ch]
	if !ok {
		return 0, 0, false
	}
	left := time.Until(e.until)
	if left <= 0 || mark != e.mark {
		delete(y.m, ch)
		y.n.Store(int32(len(y.m)))
		return 0, 0, false
	}
	return e.token, left, true
}
