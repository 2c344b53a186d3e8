// Package memlock is an in-process distlock backend. Locks live in memory
// and are shared by every client of one [Backend] value, so it coordinates
// goroutines of one process only.
//
// It implements the whole driver contract — TTL expiry on the monotonic
// clock, fencing tokens, notified waiting that wakes fair waiters in turn,
// fair locks, read-write locks, semaphores, re-entrant locks, inspection —
// and passes the conformance suite, which makes it the reference backend,
// the one the examples use, and a fast stand-in for a real backend in unit
// tests of code that takes locks.
package memlock

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// errNil is returned by the methods of a nil *Backend.
var errNil = fmt.Errorf("memlock: nil *Backend: %w", distlock.ErrInvalidBackend)

// Backend is an in-memory lock store. The zero value is an empty store,
// ready to use, as is the result of New. The methods of a nil *Backend
// return an error wrapping distlock.ErrInvalidBackend.
type Backend struct {
	mu       sync.Mutex
	keys     map[string]*state // keys with holders, waiters or a claim
	issued   uint64            // the last fencing token issued, for any key
	lastly   lastTokens        // each free key's last token, for a while
	watchers map[string]map[*watch]struct{}
	receipts receipts
}

var _ driver.Backend = (*Backend)(nil)

// New returns an empty store.
func New() *Backend {
	b := new(Backend)
	b.init()
	return b
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

// start begins a method call: it checks b and ctx, and locks b.mu.
func (b *Backend) start(ctx context.Context) error {
	if b != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return b.lock()
}

// Capabilities implements driver.Backend: memlock offers everything.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := checkRequest(req); err != nil {
		return driver.Grant{}, err
	}
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	s := b.state(req.Key)
	defer b.settle(req.Key, s, now)
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

// checkRequest rejects requests no caller following the contract sends.
func checkRequest(req driver.Request) error {
	switch {
	case req.TTL <= 0:
		return fmt.Errorf("memlock: TTL %v is not positive", req.TTL)
	case req.Kind > driver.Permit:
		return fmt.Errorf("memlock: unknown lock kind %d", req.Kind)
	case req.Kind == driver.Permit && req.Limit < 1:
		return fmt.Errorf("memlock: a semaphore of %d permits", req.Limit)
	}
	return nil
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	now := time.Now()
	s := b.keys[l.Key]
	if s == nil {
		return b.notHeld(l, now)
	}
	defer b.settle(l.Key, s, now)
	s.prune(now)
	wake := s.leaveQueue(l.Owner)
	if s.claim.owner == l.Owner { // a writer gave up waiting
		s.claim, wake = place{}, true
	}
	if _, held := s.holds[l.Owner]; !held {
		s.wake = s.wake || wake
		return b.notHeld(l, now)
	}
	delete(s.holds, l.Owner)
	b.receipts.add(l, now)
	// Waiters can enter when the lease set is empty, or has a free permit.
	s.wake = s.wake || wake || len(s.holds) == 0 || s.kind == driver.Permit
	return nil
}

// notHeld is Release's answer for an owner without a holding: nil if it
// is a repeat of a release of this owner's, else ErrNotHeld.
func (b *Backend) notHeld(l driver.Lease, now time.Time) error {
	if b.receipts.has(l, now) {
		return nil
	}
	return driver.ErrNotHeld
}

// Refresh implements driver.Backend.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("memlock: TTL %v is not positive", ttl)
	}
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	s := b.keys[l.Key]
	if s == nil {
		return 0, driver.ErrNotHeld
	}
	defer b.settle(l.Key, s, now)
	s.prune(now)
	h := s.holds[l.Owner]
	if h == nil {
		return 0, driver.ErrNotHeld
	}
	s.extend(h, now, ttl)
	return ttl, nil
}

// Inspect implements driver.Backend.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return b.examine(ctx, key, false)
}

// examine returns what Inspect reports about key and, if breaking, ends
// every holding of key and wakes its waiters.
func (b *Backend) examine(ctx context.Context, key string, breaking bool) (driver.Info, error) {
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	defer b.mu.Unlock()
	info := driver.Info{Token: b.lastly.get(key, time.Now())}
	s := b.keys[key]
	if s == nil {
		return info, nil
	}
	if s.token > 0 {
		info.Token = s.token
	}
	now := time.Now()
	defer b.settle(key, s, now)
	s.prune(now)
	if len(s.holds) > 0 {
		info = s.info(now)
		if breaking {
			clear(s.holds)
			s.wake = true
		}
	}
	return info, nil
}

// List implements driver.Backend.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	var list []driver.KeyInfo
	for key, s := range b.keys {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		s.prune(now)
		if len(s.holds) > 0 {
			list = append(list, driver.KeyInfo{Key: key, Info: s.info(now)})
		}
		b.settle(key, s, now)
	}
	slices.SortFunc(list, func(a, b driver.KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return list, nil
}

// Break implements driver.Backend.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	return b.examine(ctx, key, true)
}

// Expire ends every holding of key at once (the lock, its readers or its
// permits), as if their TTL had run out: the holders are not told, and
// their next renewal is refused. It exists for tests of code that must
// survive losing a lock.
func (b *Backend) Expire(key string) {
	_, _ = b.Break(context.Background(), key)
}

// Close implements driver.Backend. A Backend holds nothing to free.
func (b *Backend) Close() error {
	if b == nil {
		return errNil
	}
	return nil
}

// state returns key's state, made if it has none. b.mu is held.
func (b *Backend) state(key string) *state {
	s := b.keys[key]
	if s == nil {
		s = &state{holds: make(map[string]*hold)}
		b.keys[key] = s
	}
	return s
}

// settle ends every call that looked at s: it drops what lapsed by now,
// wakes the waiters if something freed, sets the timer for the next lapse
// and forgets s when it is empty. b.mu is held.
func (b *Backend) settle(key string, s *state, now time.Time) {
	s.prune(now)
	if s.wake {
		s.wake = false
		b.notify(key, s)
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
		b.settle(key, s, time.Now())
	}
}

// notify wakes the watchers of key: with fair waiters in line, only the
// first of them (and the watchers that are not in line); else everyone.
// b.mu is held.
func (b *Backend) notify(key string, s *state) {
	turn := ""
	if len(s.queue) > 0 {
		turn = s.queue[0].owner
	}
	for w := range b.watchers[key] {
		if turn != "" && w.owner != "" && w.owner != turn {
			continue
		}
		select {
		case w.c <- struct{}{}:
		default: // one pending wake-up is enough
		}
	}
}

// Watch implements driver.Backend.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	w := &watch{b: b, key: key, owner: owner, c: make(chan struct{}, 1)}
	set := b.watchers[key]
	if set == nil {
		set = make(map[*watch]struct{})
		b.watchers[key] = set
	}
	set[w] = struct{}{}
	return w, nil
}

type watch struct {
	b     *Backend
	key   string
	owner string // a fair waiter's, woken in its turn only; "" for every release
	c     chan struct{}
	once  sync.Once
}

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.b.mu.Lock()
		defer w.b.mu.Unlock()
		set := w.b.watchers[w.key]
		delete(set, w)
		if len(set) == 0 {
			delete(w.b.watchers, w.key)
		}
	})
	return nil
}

// Stores opened by URL, by name: "mem://" and "mem://jobs" are two stores,
// each shared by every client that opens the same URL in this process.
var named struct {
	sync.Mutex
	stores map[string]*Backend
}

func init() {
	distlock.Register("mem", func(_ context.Context, u *url.URL) (driver.Backend, error) {
		named.Lock()
		defer named.Unlock()
		if named.stores == nil {
			named.stores = make(map[string]*Backend)
		}
		name := u.Host + u.Path
		b := named.stores[name]
		if b == nil {
			b = New()
			named.stores[name] = b
		}
		return b, nil
	})
}

// Stored lists what b keeps about the keys whose names begin with prefix,
// after dropping what lapsed: the state of keys held or waited for, the
// last token of keys freed lately, release receipts and watches. A key
// nobody holds or waits for leaves nothing after about 10s. It is for
// tests that check that a program leaves no lock behind (and for
// distlocktest.Harness.Stored).
func (b *Backend) Stored(prefix string) []string {
	if err := b.lock(); err != nil {
		return nil
	}
	defer b.mu.Unlock()
	now := time.Now()
	b.lastly.drop(now)
	b.receipts.drop(now)
	var out []string
	add := func(what, key string) {
		if strings.HasPrefix(key, prefix) {
			out = append(out, what+" "+key)
		}
	}
	for key := range b.keys {
		add("state", key)
	}
	for key := range b.lastly.token {
		add("token", key)
	}
	for l := range b.receipts.at {
		add("receipt", l.Key)
	}
	for key := range b.watchers {
		add("watch", key)
	}
	slices.Sort(out)
	return out
}
