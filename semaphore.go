package distlock

import (
	"context"

	"github.com/distlock-go/distlock/driver"
)

// Semaphore is a distributed counting semaphore: up to n holders at once,
// each with a lease of its own, renewed and lost independently, as a
// [Lock]. Use it to bound concurrency across machines ("at most 3 workers
// call the payment provider"). A key is used either as a Mutex or as a
// Semaphore, and every client must give it the same n. It is not
// re-entrant: see [OwnerID].
type Semaphore struct{ d desc }

// Semaphore returns the counting semaphore named key with n permits. Like
// [Client.Mutex] it holds nothing by itself. Backends without semaphores
// (see driver.Capabilities) make Acquire fail with an error wrapping
// errors.ErrUnsupported; n < 1 makes it fail with [ErrInvalidArgument].
func (c *Client) Semaphore(key string, n int, opts ...Option) *Semaphore {
	s := &Semaphore{}
	c.describeLock(&s.d, key, driver.Permit, opts)
	s.d.limit = n
	if n < 1 {
		s.d.opts.invalid("semaphore %q with %d permits; want at least 1", key, n)
	}
	return s
}

// Key returns the semaphore's name.
func (s *Semaphore) Key() string { return s.d.key }

// Acquire takes a permit, waiting until one is free or ctx is done, as
// [Mutex.Lock] waits. The returned [Lock] is the permit: its token is a
// fencing token, its Done closes if the permit's lease is lost, and Unlock
// gives it back.
func (s *Semaphore) Acquire(ctx context.Context) (*Lock, error) { return s.d.lock(ctx) }

// TryAcquire takes a permit if one is free, and returns [ErrNotObtained]
// at once otherwise.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lock, error) { return s.d.tryLock(ctx) }
