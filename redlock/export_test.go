package redlock

import "time"

// WithClock replaces the clock that measures how long an operation took,
// so that tests can make an operation appear slow.
func WithClock(now func() time.Time) Option { return func(b *Backend) { b.now = now } }
