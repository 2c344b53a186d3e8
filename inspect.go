package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Info describes a lock as the backend sees it, without the owners: see
// [Client.Inspect].
type Info struct {
	Key  string
	Held bool
	Kind Kind // what the holdings take, when Held

	// Token is the fencing token of the newest holding, or, when the key
	// is free, the last one issued (0 if it was never locked).
	Token uint64

	// TTL is the remaining lease when Held, as the backend counts it (the
	// longest, for readers and permits).
	TTL time.Duration

	// Holds counts, when Held, the holds of a re-entrant lock (see
	// [OwnerID]), or the readers, or the permits in use.
	Holds int

	// Meta is what the holder stored about itself: "host" and "pid" by
	// default, "since" where the backend keeps it, and [WithMetadata].
	Meta map[string]string

	// Warnings name conditions of the deployment that put the lock's
	// guarantees at risk, one short sentence each.
	Warnings []string
}

// Kind is what a holding takes of its key.
type Kind uint8

// The kinds of holdings.
const (
	KindMutex  Kind = Kind(driver.Exclusive) // a Mutex
	KindWrite  Kind = Kind(driver.Write)     // an RWMutex's writer
	KindRead   Kind = Kind(driver.Read)      // an RWMutex's reader
	KindPermit Kind = Kind(driver.Permit)    // a Semaphore's permit
)

// String returns "mutex", "write", "read" or "permit".
func (k Kind) String() string {
	switch k {
	case KindMutex:
		return "mutex"
	case KindWrite:
		return "write"
	case KindRead:
		return "read"
	case KindPermit:
		return "permit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Inspect describes the lock named key without changing it, for tools and
// dashboards: whether it is held, by how many holds, its fencing token, its
// remaining lease and the holder's metadata. A free key is not an error.
// What it reports may have changed by the time it returns.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	if ctx == nil {
		return Info{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return Info{}, err
	}
	if err := validKey(key); err != nil {
		return Info{}, err
	}
	in, err := c.backend.Inspect(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("distlock: inspect %q: %w", key, err)
	}
	return Info{
		Key:      key,
		Held:     in.Held,
		Kind:     Kind(in.Kind),
		Token:    in.Token,
		TTL:      in.TTL,
		Holds:    in.Holds,
		Meta:     in.Meta,
		Warnings: in.Warnings,
	}, nil
}
