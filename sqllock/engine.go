package sqllock

import (
	"context"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// engine is the way a backend keeps its locks, chosen once by New: the
// lease table (tableEngine, table.go) or the database's connection-scoped
// locks (connEngine, conn.go). Backend's methods check their arguments,
// create the tables on first use and wake the waiters of this process;
// the engine does the rest. Dialects are data: each engine prepares its
// statements for the backend's dialect at New.
type engine interface {
	// caps is Backend.Capabilities.
	caps() driver.Capabilities
	// accepts returns an error wrapping errors.ErrUnsupported for a
	// lease of a kind the engine does not offer, to release or refresh
	// (Acquire checks a request against caps).
	accepts(l driver.Lease) error
	// acquire makes one attempt at req, whose metadata is meta (JSON).
	acquire(ctx context.Context, req driver.Request, meta string) (driver.Grant, error)
	// release ends l's hold, and returns the fair waiter it handed the
	// lock to, if any.
	release(ctx context.Context, l driver.Lease) (handed string, err error)
	// refresh extends l's lease to ttl from now.
	refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error)
}
