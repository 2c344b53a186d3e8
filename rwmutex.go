package distlock

import (
	"context"

	"github.com/distlock-go/distlock/driver"
)

// RWMutex is a distributed read-write lock: any number of readers share
// the key, or one writer holds it alone. A writer that waits holds new
// readers off, so a steady stream of readers cannot starve it. Each
// holding is a [Lock] with its own lease and fencing token. A key is used
// either as a Mutex or as an RWMutex. It is not re-entrant: see [OwnerID].
type RWMutex struct {
	w, r desc
}

// RWMutex returns the read-write lock named key. Backends without them
// (see driver.Capabilities) make its methods fail with an error wrapping
// errors.ErrUnsupported.
func (c *Client) RWMutex(key string, opts ...Option) *RWMutex {
	rw := &RWMutex{}
	c.describeLock(&rw.w, key, driver.Write, opts)
	c.describeLock(&rw.r, key, driver.Read, opts)
	return rw
}

// Key returns the lock's name.
func (rw *RWMutex) Key() string { return rw.w.key }

// Lock takes the lock for writing, waiting as [Mutex.Lock] does until no
// reader or writer holds it.
func (rw *RWMutex) Lock(ctx context.Context) (*Lock, error) { return rw.w.lock(ctx) }

// TryLock takes the lock for writing if it is free, or returns
// [ErrNotObtained] at once.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lock, error) { return rw.w.tryLock(ctx) }

// RLock takes the lock for reading, waiting until no writer holds it or
// waits for it.
func (rw *RWMutex) RLock(ctx context.Context) (*Lock, error) { return rw.r.lock(ctx) }

// TryRLock takes the lock for reading if no writer holds it or waits for
// it, or returns [ErrNotObtained] at once.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lock, error) { return rw.r.tryLock(ctx) }
