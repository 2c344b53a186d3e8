package memlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// errNil is returned by the methods of a nil *Backend.
var errNil = fmt.Errorf("memlock: nil *Backend: %w", driver.ErrInvalidBackend)

// Backend is an in-memory lock store. The zero value is an empty store,
// ready to use, as is the result of New. The methods of a nil *Backend
// return an error wrapping driver.ErrInvalidBackend.
type Backend struct {
	maxTTL time.Duration      // the longest lease granted; 0: no limit
	opts   driver.OptionCheck // the first invalid option, if any

	mu       sync.Mutex
	keys     map[string]*state // keys with holders, waiters or a claim
	issued   uint64            // the last fencing token issued, for any key
	lastly   lastTokens        // each free key's last token, for a while
	watchers map[string]map[*watch]struct{}
	receipts receipts
}

var _ driver.Backend = (*Backend)(nil)

// New returns an empty store. An invalid option makes every method fail
// with an error wrapping driver.ErrInvalidBackend.
func New(opts ...Option) *Backend {
	b := new(Backend)
	for _, o := range opts {
		if o == nil {
			b.opts.Invalid("memlock", "New", "a nil Option")
			continue
		}
		o(b)
	}
	b.init()
	return b
}

// An Option configures a [Backend] made by [New].
type Option func(*Backend)

// WithMaxTTL makes the store refuse a lease longer than max, with an error
// wrapping a [*driver.TTLTooLongError], as the Redis backends refuse one
// longer than their maximum lease: for tests of code that must cope with
// such a backend. Without it, any TTL is granted. A max that is not
// positive makes every method fail.
func WithMaxTTL(max time.Duration) Option {
	return func(b *Backend) {
		if max <= 0 {
			b.opts.Invalid("memlock", fmt.Sprintf("WithMaxTTL(%v)", max), "want a positive maximum lease length")
			return
		}
		b.maxTTL = max
	}
}

// checkTTL refuses a lease longer than the maximum.
func (b *Backend) checkTTL(ttl time.Duration) error {
	if b.maxTTL > 0 && ttl > b.maxTTL {
		return fmt.Errorf("memlock: %w", &driver.TTLTooLongError{TTL: ttl, Max: b.maxTTL, Why: "set by memlock.WithMaxTTL"})
	}
	return nil
}

func (b *Backend) init() {
	b.keys = make(map[string]*state)
	b.watchers = make(map[string]map[*watch]struct{})
}

// lock locks b.mu, after readying a zero Backend. It fails on a nil b.
func (b *Backend) lock() error {
	if b == nil {
		return errNil
	}
	b.mu.Lock()
	if b.keys == nil {
		b.init()
	}
	return nil
}

// start begins a method call: it checks b, its options and ctx, and
// locks b.mu.
func (b *Backend) start(ctx context.Context) error {
	if b == nil {
		return errNil
	}
	if err := b.opts.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.lock()
}

// Capabilities implements driver.Backend: memlock offers everything.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := req.Validate(b.Capabilities()); err != nil {
		return driver.Grant{}, fmt.Errorf("memlock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	now := time.Now()
	s := b.stateLocked(req.Key)
	defer b.settleLocked(req.Key, s, now)
	s.prune(now)
	if h := s.holds[req.Owner]; h != nil { // a repeat of a granted attempt
		s.extend(h, now, req.TTL)
		return driver.Grant{Acquired: true, Token: h.token, ValidFor: req.TTL}, nil
	}
	if len(s.holds) > 0 && !driver.Compatible(s.kind, s.limit, req.Kind, req.Limit) {
		return driver.Grant{}, &driver.KindError{Key: req.Key, Held: s.kind.Family(), HeldLimit: s.limit, Asked: req.Kind, AskedLimit: req.Limit}
	}
	if until, blocked := s.blocked(req); blocked {
		s.wait(req, now)
		return driver.Grant{RetryAfter: max(until.Sub(now), time.Millisecond)}, nil
	}
	s.leaveQueue(req.Owner)
	if s.claim.owner == req.Owner {
		s.claim = place{}
	}
	if len(s.holds) > 0 && req.Kind == driver.Exclusive { // a re-entrant hold: the lease's token, the longer lease
		var token uint64
		for _, o := range s.holds {
			token = o.token
		}
		h := &hold{token: token, since: now, meta: req.Meta}
		s.holds[req.Owner] = h
		s.extend(h, now, req.TTL)
		return driver.Grant{Acquired: true, Token: token, ValidFor: req.TTL}, nil
	}
	b.issued++ // one order for every key: a key forgotten when free needs no counter of its own
	if len(s.holds) == 0 {
		s.kind, s.reentry, s.limit = req.Kind, req.Reentry, req.Limit
	}
	s.token = b.issued
	s.holds[req.Owner] = &hold{token: b.issued, expires: now.Add(req.TTL), since: now, meta: req.Meta}
	return driver.Grant{Acquired: true, Token: b.issued, ValidFor: req.TTL}, nil
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("memlock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	now := time.Now()
	s := b.keys[l.Key]
	if s == nil {
		return b.notHeldLocked(l, now)
	}
	defer b.settleLocked(l.Key, s, now)
	s.prune(now)
	wake := s.leaveQueue(l.Owner)
	if s.claim.owner == l.Owner { // a writer gave up waiting
		s.claim, wake = place{}, true
	}
	if _, held := s.holds[l.Owner]; !held {
		s.wake = s.wake || wake
		return b.notHeldLocked(l, now)
	}
	delete(s.holds, l.Owner)
	b.receipts.add(l.ID(), now)
	// Waiters can enter when the lease set is empty, or has a free permit.
	s.wake = s.wake || wake || len(s.holds) == 0 || s.kind == driver.Permit
	return nil
}

// notHeldLocked is Release's answer for an owner without a holding: nil
// if it is a repeat of a release of this owner's, else ErrNotHeld.
func (b *Backend) notHeldLocked(l driver.Lease, now time.Time) error {
	if b.receipts.has(l.ID(), now) {
		return nil
	}
	return driver.ErrNotHeld
}

// Refresh implements driver.Backend.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("memlock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	now := time.Now()
	s := b.keys[l.Key]
	if s == nil {
		return 0, driver.ErrNotHeld
	}
	defer b.settleLocked(l.Key, s, now)
	s.prune(now)
	h := s.holds[l.Owner]
	if h == nil {
		return 0, driver.ErrNotHeld
	}
	s.extend(h, now, ttl)
	return ttl, nil
}

// Close implements driver.Backend. A Backend holds nothing to free.
func (b *Backend) Close() error {
	if b == nil {
		return errNil
	}
	return nil
}

// stateLocked returns key's state, made if it has none.
func (b *Backend) stateLocked(key string) *state {
	s := b.keys[key]
	if s == nil {
		s = &state{holds: make(map[string]*hold)}
		b.keys[key] = s
	}
	return s
}

// settleLocked ends every call that looked at s: it drops what lapsed by
// now, wakes the waiters if something freed, sets the timer for the next
// lapse and forgets s when it is empty.
func (b *Backend) settleLocked(key string, s *state, now time.Time) {
	s.prune(now)
	if s.wake {
		s.wake = false
		b.notifyLocked(key, s)
	}
	next := s.nextLapse()
	if next.IsZero() {
		if s.timer != nil {
			s.timer.Stop()
		}
		if b.keys[key] == s {
			delete(b.keys, key)
			b.lastly.add(key, s.token, now)
		}
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(next.Sub(now), func() { b.lapse(key, s) })
	} else {
		s.timer.Reset(next.Sub(now))
	}
}

// lapse runs on s's timer, when a holding, a place in line or a claim
// may have lapsed.
func (b *Backend) lapse(key string, s *state) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys[key] == s {
		b.settleLocked(key, s, time.Now())
	}
}
