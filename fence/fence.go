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

// NewStaleError returns an error wrapping [ErrStale] that names the refused
// token and the highest accepted one, for a resource that checks tokens
// itself (as [Guard] and package redisfence do) and reports refusals as the
// helpers of this package do.
func NewStaleError(token, highest uint64) error {
	return fmt.Errorf("%w: token %d is lower than %d, the highest accepted", ErrStale, token, highest)
}

// NewTokenReusedError returns an error wrapping [ErrStale] and
// [ErrTokenReused] for a resource that accepted token from the holder
// accepted and refuses it from the holder refused.
func NewTokenReusedError(token uint64, accepted, refused string) error {
	return fmt.Errorf("%w: %w: token %d was accepted from holder %s, not %s", ErrStale, ErrTokenReused, token, accepted, refused)
}
