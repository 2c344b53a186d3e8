package driver

import (
	"errors"
	"fmt"
	"time"
)

// Limits of the contract. Package distlock sends nothing beyond them.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024

	// MaxOwnerLen is the longest owner token, in bytes.
	MaxOwnerLen = 255
)

// ValidateKey reports whether key is one the contract allows: 1 to
// [MaxKeyLen] bytes, else an error wrapping [ErrInvalidKey]. The methods
// given a key alone (Watch, Inspect, Break) call it before anything else
// and return its error, wrapped with the backend's name; [Lease.Validate]
// begins with it.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty key: %w", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes, longer than %d: %w", len(key), MaxKeyLen, ErrInvalidKey)
	}
	return nil
}

// Validate reports whether l is a lease the contract allows: a key that
// [ValidateKey] allows, an owner of 1 to [MaxOwnerLen] bytes and a known
// [Kind] (else an error wrapping [ErrInvalidRequest]). Release and Refresh
// call it, or [Lease.ValidateRefresh], before anything else.
func (l Lease) Validate() error {
	if err := ValidateKey(l.Key); err != nil {
		return err
	}
	switch {
	case l.Owner == "":
		return fmt.Errorf("key %q: empty owner: %w", l.Key, ErrInvalidRequest)
	case len(l.Owner) > MaxOwnerLen:
		return fmt.Errorf("key %q: owner of %d bytes, longer than %d: %w", l.Key, len(l.Owner), MaxOwnerLen, ErrInvalidRequest)
	case l.Kind > Permit:
		return fmt.Errorf("key %q: unknown lock kind %d: %w", l.Key, uint8(l.Kind), ErrInvalidRequest)
	}
	return nil
}

// ValidateRefresh is [Lease.Validate] for a Refresh of l to ttl, which
// must be positive.
func (l Lease) ValidateRefresh(ttl time.Duration) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("key %q: TTL %v is not positive: %w", l.Key, ttl, ErrInvalidRequest)
	}
	return nil
}

// Validate reports whether r is a request the contract allows of a
// backend that offers c, the backend's own Capabilities. Acquire calls it
// before anything else and returns its error, wrapped with the backend's
// name:
//
//	if err := req.Validate(b.Capabilities()); err != nil {
//		return driver.Grant{}, fmt.Errorf("mybackend: %w", err)
//	}
//
// It checks the lease ([Lease.Validate]), a positive TTL and a Limit of at
// least 1 for [Permit] (else an error wrapping [ErrInvalidRequest]), and
// that the backend offers what r asks for: a kind, fairness or re-entrance
// the backend does not claim, or a fair or re-entrant request of another
// kind than [Exclusive], fails with an error wrapping
// [errors.ErrUnsupported]. What a backend cannot store beyond these limits
// (a character, a shorter TTL) it checks itself, after Validate.
func (r *Request) Validate(c Capabilities) error {
	if err := r.Lease.Validate(); err != nil {
		return err
	}
	switch {
	case r.TTL <= 0:
		return fmt.Errorf("key %q: TTL %v is not positive: %w", r.Key, r.TTL, ErrInvalidRequest)
	case r.Kind == Permit && r.Limit < 1:
		return fmt.Errorf("key %q: a semaphore of %d permits (want at least 1): %w", r.Key, r.Limit, ErrInvalidRequest)
	case (r.Kind == Write || r.Kind == Read) && !c.ReadWrite, r.Kind == Permit && !c.Semaphore:
		return fmt.Errorf("key %q: a %s: %w by this backend", r.Key, r.Kind, errors.ErrUnsupported)
	case r.Fair && r.Kind != Exclusive:
		return fmt.Errorf("key %q: a fair %s: only a mutex can be fair: %w", r.Key, r.Kind, errors.ErrUnsupported)
	case r.Reentry != "" && r.Kind != Exclusive:
		return fmt.Errorf("key %q: a re-entrant %s: only a mutex can be re-entrant: %w", r.Key, r.Kind, errors.ErrUnsupported)
	case r.Fair && !c.Fair:
		return fmt.Errorf("key %q: a fair mutex: %w by this backend", r.Key, errors.ErrUnsupported)
	case r.Reentry != "" && !c.Reentrant:
		return fmt.Errorf("key %q: a re-entrant mutex: %w by this backend", r.Key, errors.ErrUnsupported)
	}
	return nil
}
