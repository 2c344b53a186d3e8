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
	// is free, the last one issued (0 if it was never locked, or if the
	// backend has forgotten the key: a free key leaves no state behind
	// for long, and tokens stay increasing without it).
	Token uint64

	// TTL is the remaining lease when Held, as the backend counts it (the
	// longest, for readers and permits).
	TTL time.Duration

	// Holds counts, when Held, the holds of a re-entrant lock (see
	// [OwnerID]), or the readers, or the permits in use.
	Holds int

	// Limit is, when a semaphore holds the key, its number of permits.
	Limit int

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
	return c.describe(ctx, key, false)
}

// describe is Inspect or, if breaking, Break.
func (c *Client) describe(ctx context.Context, key string, breaking bool) (Info, error) {
	if ctx == nil {
		return Info{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return Info{}, err
	}
	if err := validKey(key); err != nil {
		return Info{}, err
	}
	op, call := "inspect", c.backend.Inspect
	if breaking {
		op, call = "break", c.backend.Break
	}
	in, err := call(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("distlock: %s %q: %w", op, key, err)
	}
	return infoOf(key, in), nil
}

func infoOf(key string, in driver.Info) Info {
	return Info{
		Key:      key,
		Held:     in.Held,
		Kind:     Kind(in.Kind),
		Token:    in.Token,
		TTL:      in.TTL,
		Holds:    in.Holds,
		Limit:    in.Limit,
		Meta:     in.Meta,
		Warnings: in.Warnings,
	}
}

// List describes the held locks whose names begin with prefix (all of
// them when prefix is empty), sorted by name, as [Client.Inspect] would.
// It is an operator's tool: it may scan the whole store, and a lock may
// change while the list is made.
func (c *Client) List(ctx context.Context, prefix string) ([]Info, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return nil, err
	}
	list, err := c.backend.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("distlock: list %q: %w", prefix, err)
	}
	infos := make([]Info, len(list))
	for i, k := range list {
		infos[i] = infoOf(k.Key, k.Info)
	}
	return infos, nil
}

// Break frees the lock named key, whoever holds it (its holder, its
// readers or its permits), and wakes its waiters. It is an operator's
// remedy for a holder that is stuck but still renewing, never part of
// normal locking: the holders are not told at once; each learns at its
// next renewal (by the watchdog, within about a third of its TTL), when
// its Done closes with [ErrLockLost], and work it does meanwhile can only
// be stopped by the fencing token, which Break keeps increasing for the
// next holder. It returns the lock as it was just before: Held is false
// if it was free, and then nothing changed.
func (c *Client) Break(ctx context.Context, key string) (Info, error) {
	return c.describe(ctx, key, true)
}
