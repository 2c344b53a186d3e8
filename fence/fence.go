package fence

import (
	"errors"
	"fmt"
)

// ErrStale is returned, wrapped, when a write carries a fencing token lower
// than the highest the resource has accepted: a later holding of the lock
// has written since, and the writer's lease must have ended. Test for it
// with errors.Is.
var ErrStale = errors.New("fence: stale fencing token")

func staleError(token, highest uint64) error {
	return fmt.Errorf("%w: token %d is lower than %d, the highest accepted", ErrStale, token, highest)
}
