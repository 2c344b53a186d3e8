package driver

import "fmt"

// OptionCheck records the first invalid option given to a backend, for
// the one policy every backend follows, package distlock's own: a
// constructor that does no I/O returns no error, so it records what is
// wrong, and every method of the backend then fails with that error,
// which wraps [ErrInvalidBackend] (package distlock reports it at once
// rather than retrying). Only a constructor that does I/O (dials,
// creates a table) returns an error, and it returns Err with it. An
// option is checked when it is applied, never later: a nil function
// option is recorded here, not stored and called.
//
// The zero value has recorded nothing. A backend keeps one in its
// configuration:
//
//	func WithMaxTTL(d time.Duration) Option {
//		return func(b *Backend) {
//			if d <= 0 {
//				b.opts.Invalid("mybackend", fmt.Sprintf("WithMaxTTL(%v)", d), "want a positive maximum")
//				return
//			}
//			b.maxTTL = d
//		}
//	}
//
// and starts every method with
//
//	if err := b.opts.Err(); err != nil {
//		return driver.Grant{}, err
//	}
type OptionCheck struct {
	err error
}

// Invalid records that option (as the caller wrote it, "WithDrift(nil)")
// of backend pkg cannot work, and why (what it wants instead), unless an
// earlier option was recorded.
func (c *OptionCheck) Invalid(pkg, option, why string) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s: %s: %w", pkg, option, why, ErrInvalidBackend)
	}
}

// Err returns the error of the first invalid option, or nil.
func (c *OptionCheck) Err() error { return c.err }
