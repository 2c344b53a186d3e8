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

// ErrTokenReused is returned, wrapped together with [ErrStale], when a
// write carries the token that the resource already accepted from a
// different holder (see [Guard.DoHolder]). Tokens increase with every
// holding, so two holders with one token mean that the lock's store issued
// it twice, after losing its data; the resource cannot tell which of them
// is current and keeps the one it saw first.
var ErrTokenReused = errors.New("fence: fencing token reused by another holder")

func reusedError(token uint64, first, second string) error {
	return fmt.Errorf("%w: %w: token %d was accepted from holder %s, not %s", ErrStale, ErrTokenReused, token, first, second)
}

func staleError(token, highest uint64) error {
	return fmt.Errorf("%w: token %d is lower than %d, the highest accepted", ErrStale, token, highest)
}
