package distlock

import (
	"context"
	"sync"
	"time"
)

// releaseCtx is the context of a release: the values of the caller's
// context, none of its cancellation (a release must not be cut short by
// the caller's end, or the lock stays held until its TTL), and a deadline
// of its own. It is what context.WithTimeout(context.WithoutCancel(parent),
// d) makes, in one allocation until something asks for Done: a release that
// a backend answers without waiting (most do) never builds the channel and
// its timer, which the standard pair builds at once.
type releaseCtx struct {
	parent   context.Context // for its values only
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	timer *time.Timer   // closes done at the deadline
	err   error
}

func newReleaseCtx(parent context.Context, d time.Duration) *releaseCtx {
	return &releaseCtx{parent: parent, deadline: time.Now().Add(d)}
}

func (c *releaseCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *releaseCtx) Value(key any) any { return c.parent.Value(key) }

func (c *releaseCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil { // ended before anyone asked for Done
			close(c.done)
			return c.done
		}
		c.expireLocked()
		if c.err == nil {
			c.timer = time.AfterFunc(time.Until(c.deadline), c.expire)
		}
	}
	return c.done
}

func (c *releaseCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return c.err
}

func (c *releaseCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
}

// expireLocked ends the context once its deadline has passed, closing
// done if it was made. A context ended earlier by stop stays as it is.
func (c *releaseCtx) expireLocked() {
	if c.err != nil || time.Now().Before(c.deadline) {
		return
	}
	c.err = context.DeadlineExceeded
	if c.done != nil {
		close(c.done)
	}
}

// stop ends the context, as the cancel function of WithTimeout does: what
// a backend left waiting on it after the release returned ends with it.
func (c *releaseCtx) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.err == nil {
		c.err = context.Canceled
		if c.done != nil {
			close(c.done)
		}
	}
}

func (c *releaseCtx) String() string { return "distlock release context" }
