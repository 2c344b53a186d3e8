// Package memlock is an in-process distlock backend. Locks live in memory
// and are shared by every client of one [Backend] value, so it coordinates
// goroutines of one process only.
//
// It implements the whole driver contract — TTL expiry on the monotonic
// clock, fencing tokens, notified waiting, inspection — and passes the
// conformance suite, which makes it the reference backend, the one the
// examples use, and a fast stand-in for a real backend in unit tests of code
// that takes locks.
package memlock

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strconv"
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
	locks    map[string]*entry
	fences   map[string]uint64 // kept after release: tokens never go back
	watchers map[string]map[*watch]struct{}
	queues   map[string][]waiter          // fair waiters, first come first
	permits  map[string]map[string]*entry // semaphores: owner -> permit
	readers  map[string]map[string]*entry // read-write locks: owner -> read lease
	writing  map[string]waiter            // read-write locks: the writer waiting
}

type waiter struct {
	owner    string
	deadline time.Time // dropped from the queue unless renewed by then
}

type entry struct {
	owner   string
	token   uint64
	expires time.Time
	since   time.Time
	meta    map[string]string
	timer   *time.Timer // wakes watchers when the lease runs out
}

var (
	_ driver.Backend   = (*Backend)(nil)
	_ driver.Waiter    = (*Backend)(nil)
	_ driver.Inspector = (*Backend)(nil)
	_ driver.Queuer    = (*Backend)(nil)
	_ driver.Semaphore = (*Backend)(nil)
	_ driver.RWLocker  = (*Backend)(nil)
)

// New returns an empty store.
func New() *Backend {
	b := new(Backend)
	b.init()
	return b
}

func (b *Backend) init() {
	b.locks = make(map[string]*entry)
	b.fences = make(map[string]uint64)
	b.watchers = make(map[string]map[*watch]struct{})
	b.queues = make(map[string][]waiter)
	b.permits = make(map[string]map[string]*entry)
	b.readers = make(map[string]map[string]*entry)
	b.writing = make(map[string]waiter)
}

// lock locks b.mu, after readying a zero Backend. It fails on a nil b.
func (b *Backend) lock() error {
	if b == nil {
		return errNil
	}
	b.mu.Lock()
	if b.locks == nil {
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

// retryAfter is the Grant.RetryAfter of an attempt refused until t: never
// zero (which means "unknown" and leaves a waiter to its safety poll), even
// when t is now or just past.
func retryAfter(t, now time.Time) time.Duration {
	return max(t.Sub(now), time.Millisecond)
}

// Capabilities implements driver.Backend.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{NotifiedWait: true, Fair: true, Semaphore: true, ReadWrite: true}
}

// held returns key's live entry, dropping an expired one. b.mu is held.
func (b *Backend) held(key string, now time.Time) *entry {
	e := b.locks[key]
	if e != nil && !now.Before(e.expires) {
		e.timer.Stop()
		delete(b.locks, key)
		return nil
	}
	return e
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	return b.acquire(req, time.Now()), nil
}

// acquire is Acquire with b.mu held.
func (b *Backend) acquire(req driver.AcquireRequest, now time.Time) driver.Grant {
	if e := b.held(req.Key, now); e != nil {
		if e.owner != req.Owner {
			if req.Fair && req.Queue > 0 {
				b.enqueue(req.Key, req.Owner, now.Add(req.Queue))
			}
			return driver.Grant{RetryAfter: retryAfter(e.expires, now)}
		}
		e.extend(now, req.TTL) // a retry of our own attempt
		return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}
	}
	if req.Fair && !b.mayGo(req.Key, req.Owner, now) {
		if req.Queue > 0 {
			b.enqueue(req.Key, req.Owner, now.Add(req.Queue))
		}
		// Free, but another waiter's turn: it takes the lock, or its
		// place lapses (a waiter that vanished) at its deadline.
		return driver.Grant{RetryAfter: retryAfter(b.queues[req.Key][0].deadline, now)}
	}
	b.dequeue(req.Key, req.Owner)
	b.fences[req.Key]++
	e := &entry{owner: req.Owner, token: b.fences[req.Key], since: now, meta: req.Meta}
	key := req.Key
	e.timer = time.AfterFunc(req.TTL, func() { b.expired(key, e) })
	e.expires = now.Add(req.TTL)
	b.locks[key] = e
	return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}
}

func (e *entry) extend(now time.Time, ttl time.Duration) {
	e.expires = now.Add(ttl)
	e.timer.Reset(ttl)
}

// mayGo reports whether owner is first among the live waiters of key (or
// there are none), dropping waiters whose place lapsed. b.mu is held.
func (b *Backend) mayGo(key, owner string, now time.Time) bool {
	q := b.queues[key]
	for len(q) > 0 && !now.Before(q[0].deadline) {
		q = q[1:]
	}
	b.setQueue(key, q)
	return len(q) == 0 || q[0].owner == owner
}

// enqueue adds owner at the back of key's queue, or renews its place.
func (b *Backend) enqueue(key, owner string, deadline time.Time) {
	q := b.queues[key]
	for i := range q {
		if q[i].owner == owner {
			q[i].deadline = deadline
			return
		}
	}
	b.queues[key] = append(q, waiter{owner: owner, deadline: deadline})
}

// dequeue removes owner from key's queue. It reports whether owner was the
// first in it.
func (b *Backend) dequeue(key, owner string) bool {
	q := b.queues[key]
	for i := range q {
		if q[i].owner == owner {
			b.setQueue(key, append(q[:i:i], q[i+1:]...))
			return i == 0
		}
	}
	return false
}

func (b *Backend) setQueue(key string, q []waiter) {
	if len(q) == 0 {
		delete(b.queues, key)
	} else {
		b.queues[key] = q
	}
}

// Leave implements driver.Queuer.
func (b *Backend) Leave(ctx context.Context, key, owner string) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	wasFirst := b.dequeue(key, owner)
	if e := b.held(key, time.Now()); e != nil && e.owner == owner {
		e.timer.Stop()
		delete(b.locks, key)
		wasFirst = true
	}
	if wasFirst { // the next waiter may go now
		b.notify(key)
	}
	return nil
}

// expired runs when a lease's timer fires: the waiters may now take it.
func (b *Backend) expired(key string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.locks[key] == e && !time.Now().Before(e.expires) {
		delete(b.locks, key)
		b.notify(key)
	}
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if w, ok := b.writing[key]; ok && w.owner == owner { // a writer gave up waiting
		delete(b.writing, key)
		b.notify(key)
	}
	e := b.held(key, time.Now())
	if e == nil || e.owner != owner {
		return driver.ErrNotHeld
	}
	e.timer.Stop()
	delete(b.locks, key)
	b.notify(key)
	return nil
}

// Refresh implements driver.Backend.
func (b *Backend) Refresh(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	e := b.held(key, now)
	if e == nil || e.owner != owner {
		return 0, driver.ErrNotHeld
	}
	e.extend(now, ttl)
	return ttl, nil
}

// Inspect implements driver.Inspector.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	info := driver.Info{Token: b.fences[key]}
	if e := b.held(key, now); e != nil {
		info.Held = true
		info.TTL = e.expires.Sub(now)
		info.Meta = maps.Clone(e.meta)
		if info.Meta == nil {
			info.Meta = make(map[string]string, 1)
		}
		info.Meta["since"] = strconv.FormatInt(e.since.UnixMilli(), 10)
	}
	return info, nil
}

// Expire ends key's lease at once, as if its TTL had run out: the holder is
// not told, and its next renewal is refused. It exists for tests of code
// that must survive losing a lock.
func (b *Backend) Expire(key string) {
	if b.lock() != nil {
		return
	}
	defer b.mu.Unlock()
	if e := b.locks[key]; e != nil {
		e.timer.Stop()
		delete(b.locks, key)
		b.notify(key)
	}
}

// Watch implements driver.Waiter.
func (b *Backend) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	w := &watch{b: b, key: key, c: make(chan struct{}, 1)}
	set := b.watchers[key]
	if set == nil {
		set = make(map[*watch]struct{})
		b.watchers[key] = set
	}
	set[w] = struct{}{}
	return w, nil
}

// notify wakes every watcher of key. b.mu is held.
func (b *Backend) notify(key string) {
	for w := range b.watchers[key] {
		select {
		case w.c <- struct{}{}:
		default: // one pending wake-up is enough
		}
	}
}

type watch struct {
	b    *Backend
	key  string
	c    chan struct{}
	once sync.Once
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

// livePermits returns key's unexpired permits, dropping the others. b.mu
// is held.
func (b *Backend) livePermits(key string, now time.Time) map[string]*entry {
	ps := b.permits[key]
	for owner, e := range ps {
		if !now.Before(e.expires) {
			e.timer.Stop()
			delete(ps, owner)
		}
	}
	if len(ps) == 0 {
		delete(b.permits, key)
		return nil
	}
	return ps
}

// AcquirePermit implements driver.Semaphore.
func (b *Backend) AcquirePermit(ctx context.Context, req driver.AcquireRequest, n int) (driver.Grant, error) {
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	ps := b.livePermits(req.Key, now)
	if e := ps[req.Owner]; e != nil {
		e.extend(now, req.TTL)
		return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}, nil
	}
	if len(ps) >= n {
		var first time.Time
		for _, e := range ps {
			if first.IsZero() || e.expires.Before(first) {
				first = e.expires
			}
		}
		return driver.Grant{RetryAfter: retryAfter(first, now)}, nil
	}
	if ps == nil {
		ps = make(map[string]*entry)
		b.permits[req.Key] = ps
	}
	b.fences[req.Key]++
	e := &entry{owner: req.Owner, token: b.fences[req.Key], since: now, meta: req.Meta, expires: now.Add(req.TTL)}
	key := req.Key
	e.timer = time.AfterFunc(req.TTL, func() { b.permitExpired(key, e) })
	ps[req.Owner] = e
	return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}, nil
}

// permitExpired runs when a permit's timer fires: a waiter may take it.
func (b *Backend) permitExpired(key string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ps := b.permits[key]; ps[e.owner] == e && !time.Now().Before(e.expires) {
		delete(ps, e.owner)
		b.notify(key)
	}
}

// ReleasePermit implements driver.Semaphore.
func (b *Backend) ReleasePermit(ctx context.Context, key, owner string) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	e := b.livePermits(key, time.Now())[owner]
	if e == nil {
		return driver.ErrNotHeld
	}
	e.timer.Stop()
	delete(b.permits[key], owner)
	b.notify(key)
	return nil
}

// RefreshPermit implements driver.Semaphore.
func (b *Backend) RefreshPermit(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	e := b.livePermits(key, now)[owner]
	if e == nil {
		return 0, driver.ErrNotHeld
	}
	e.extend(now, ttl)
	return ttl, nil
}

// ExpirePermits ends every permit of the semaphore key at once, as Expire
// does for a lock.
func (b *Backend) ExpirePermits(key string) {
	if b.lock() != nil {
		return
	}
	defer b.mu.Unlock()
	for _, e := range b.permits[key] {
		e.timer.Stop()
	}
	delete(b.permits, key)
	b.notify(key)
}

// liveReaders returns key's unexpired read leases, dropping the others.
// b.mu is held.
func (b *Backend) liveReaders(key string, now time.Time) map[string]*entry {
	rs := b.readers[key]
	for owner, e := range rs {
		if !now.Before(e.expires) {
			e.timer.Stop()
			delete(rs, owner)
		}
	}
	if len(rs) == 0 {
		delete(b.readers, key)
		return nil
	}
	return rs
}

// AcquireExclusive implements driver.RWLocker.
func (b *Backend) AcquireExclusive(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	if rs := b.liveReaders(req.Key, now); len(rs) > 0 {
		if w, ok := b.writing[req.Key]; req.Queue > 0 && (!ok || w.owner == req.Owner || !now.Before(w.deadline)) {
			b.writing[req.Key] = waiter{owner: req.Owner, deadline: now.Add(req.Queue)}
		}
		var last time.Time
		for _, r := range rs {
			if r.expires.After(last) {
				last = r.expires
			}
		}
		return driver.Grant{RetryAfter: retryAfter(last, now)}, nil
	}
	g := b.acquire(driver.AcquireRequest{Key: req.Key, Owner: req.Owner, TTL: req.TTL, Meta: req.Meta}, now)
	if w, ok := b.writing[req.Key]; ok && w.owner == req.Owner && g.Acquired {
		delete(b.writing, req.Key)
	}
	return g, nil
}

// AcquireShared implements driver.RWLocker.
func (b *Backend) AcquireShared(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	rs := b.liveReaders(req.Key, now)
	if e := rs[req.Owner]; e != nil {
		e.extend(now, req.TTL)
		return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}, nil
	}
	if e := b.held(req.Key, now); e != nil {
		return driver.Grant{RetryAfter: retryAfter(e.expires, now)}, nil
	}
	if w, ok := b.writing[req.Key]; ok && now.Before(w.deadline) {
		return driver.Grant{RetryAfter: retryAfter(w.deadline, now)}, nil
	}
	if rs == nil {
		rs = make(map[string]*entry)
		b.readers[req.Key] = rs
	}
	b.fences[req.Key]++
	e := &entry{owner: req.Owner, token: b.fences[req.Key], since: now, meta: req.Meta, expires: now.Add(req.TTL)}
	key := req.Key
	e.timer = time.AfterFunc(req.TTL, func() { b.readerExpired(key, e) })
	rs[req.Owner] = e
	return driver.Grant{Acquired: true, Token: e.token, ValidFor: req.TTL}, nil
}

func (b *Backend) readerExpired(key string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rs := b.readers[key]; rs[e.owner] == e && !time.Now().Before(e.expires) {
		delete(rs, e.owner)
		b.notify(key)
	}
}

// ReleaseShared implements driver.RWLocker.
func (b *Backend) ReleaseShared(ctx context.Context, key, owner string) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	e := b.liveReaders(key, time.Now())[owner]
	if e == nil {
		return driver.ErrNotHeld
	}
	e.timer.Stop()
	delete(b.readers[key], owner)
	b.notify(key)
	return nil
}

// RefreshShared implements driver.RWLocker.
func (b *Backend) RefreshShared(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	e := b.liveReaders(key, now)[owner]
	if e == nil {
		return 0, driver.ErrNotHeld
	}
	e.extend(now, ttl)
	return ttl, nil
}
