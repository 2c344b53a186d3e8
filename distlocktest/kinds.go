package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// kindChecks run for every backend: a key is one kind of lock while held,
// and a key nobody holds leaves nothing behind.
var kindChecks = []check{
	{"KindsExclude", nil, testKindsExclude},
	{"KindsRace", nil, testKindsRace},
	{"StateReclaimed", nil, testStateReclaimed},
}

// use is one way of locking a key, as a program would.
type use struct {
	name  string
	needs func(driver.Capabilities) bool
	take  func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error)
}

// uses lists every kind of lock and two semaphore sizes.
var uses = []use{
	{"mutex", nil, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		return lockOrTry(ctx, c.Mutex(key), try)
	}},
	{"re-entrant mutex", reentrant, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		return lockOrTry(ctx, c.Mutex(key, distlock.WithOwner(distlock.NewOwnerID())), try)
	}},
	{"reader", readWrite, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		if try {
			return c.RWMutex(key).TryRLock(ctx)
		}
		return c.RWMutex(key).RLock(ctx)
	}},
	{"writer", readWrite, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		if try {
			return c.RWMutex(key).TryLock(ctx)
		}
		return c.RWMutex(key).Lock(ctx)
	}},
	{"semaphore of 2", semaphore, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		if try {
			return c.Semaphore(key, 2).TryAcquire(ctx)
		}
		return c.Semaphore(key, 2).Acquire(ctx)
	}},
	{"semaphore of 3", semaphore, func(ctx context.Context, c *distlock.Client, key string, try bool) (*distlock.Lock, error) {
		if try {
			return c.Semaphore(key, 3).TryAcquire(ctx)
		}
		return c.Semaphore(key, 3).Acquire(ctx)
	}},
}

func lockOrTry(ctx context.Context, m *distlock.Mutex, try bool) (*distlock.Lock, error) {
	if try {
		return m.TryLock(ctx)
	}
	return m.Lock(ctx)
}

// family is the family of a use: the uses that may share a key.
func family(name string) string {
	switch name {
	case "mutex", "re-entrant mutex":
		return "mutex"
	case "reader", "writer":
		return "read-write"
	}
	return name // each semaphore size is its own
}

// testKindsExclude: while a key is held as one kind, a request of another
// kind (or another semaphore size) is refused at once, by TryLock and by
// Lock alike, with an error that says so; once the holding ends, the
// other kind may take the key.
func testKindsExclude(t testing.TB, h Harness) {
	caps := h.NewBackend(t).Capabilities()
	var usable []use
	for _, u := range uses {
		if u.needs == nil || u.needs(caps) {
			usable = append(usable, u)
		}
	}
	for _, held := range usable {
		for _, asked := range usable {
			if family(held.name) == family(asked.name) {
				continue
			}
			key := uniqueKey(t)
			holder, err := held.take(timeout(t, 10*time.Second), newClient(t, h), key, false)
			if err != nil {
				t.Fatalf("%s: %v", held.name, err)
			}
			other := newClient(t, h)
			why := fmt.Sprintf("%s asked while a %s holds the key", asked.name, held.name)
			l, err := asked.take(timeout(t, 5*time.Second), other, key, true)
			checkMismatch(t, "TryLock: "+why, key, l, err)

			// Lock must not wait for a mismatch: it may never resolve.
			ctx := timeout(t, 30*time.Second)
			l, err = asked.take(ctx, other, key, false)
			if ctx.Err() != nil {
				t.Errorf("Lock: %s: waited until its context ended: %v", why, err)
			}
			checkMismatch(t, "Lock: "+why, key, l, err)

			if err := holder.Unlock(timeout(t, 10*time.Second)); err != nil {
				t.Fatalf("Unlock %s: %v", held.name, err)
			}
			l, err = asked.take(timeout(t, 10*time.Second), other, key, true)
			if err != nil {
				t.Errorf("%s after the %s was released: %v; want granted", asked.name, held.name, err)
				continue
			}
			_ = l.Unlock(context.Background())
		}
	}
}

// checkMismatch asserts that an attempt was refused for the key's kind.
func checkMismatch(t testing.TB, why, key string, l *distlock.Lock, err error) {
	t.Helper()
	if l != nil {
		_ = l.Unlock(context.Background())
	}
	if !errors.Is(err, distlock.ErrKindMismatch) || !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("%s: %v; want an error wrapping ErrKindMismatch and ErrNotObtained", why, err)
		return
	}
	var ke *driver.KindError
	if !errors.As(err, &ke) || ke.Key != key || !strings.Contains(err.Error(), key) {
		t.Errorf("%s: %v; want a *driver.KindError that names the key", why, err)
	}
}

// testKindsRace: two requests of different kinds on a free key, at once,
// never both hold it.
func testKindsRace(t testing.TB, h Harness) {
	caps := h.NewBackend(t).Capabilities()
	other := driver.Request{Lease: driver.Lease{Kind: driver.Exclusive}}
	switch {
	case caps.Semaphore:
		other = driver.Request{Lease: driver.Lease{Kind: driver.Permit}, Limit: 3}
	case caps.ReadWrite:
		other = driver.Request{Lease: driver.Lease{Kind: driver.Read}}
	default:
		t.Skip("the backend offers one kind of lock only")
	}
	a, b := h.NewBackend(t), h.NewBackend(t)
	ctx := timeout(t, 60*time.Second)
	for round := range 10 {
		key := uniqueKey(t)
		reqs := []driver.Request{
			{Lease: driver.Lease{Key: key, Owner: owner("mutex"), Kind: driver.Exclusive}, TTL: 30 * time.Second},
			{Lease: driver.Lease{Key: key, Owner: owner("other"), Kind: other.Kind}, Limit: other.Limit, TTL: 30 * time.Second},
		}
		var (
			wg      sync.WaitGroup
			granted [2]bool
		)
		for i, be := range []driver.Backend{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := be.Acquire(ctx, reqs[i])
				granted[i] = err == nil && g.Acquired
				if err != nil && !errors.Is(err, driver.ErrKindMismatch) {
					t.Errorf("round %d: Acquire(%s): %v", round, reqs[i].Owner, err)
				}
			}()
		}
		wg.Wait()
		for i, be := range []driver.Backend{a, b} {
			_ = be.Release(context.Background(), reqs[i].Lease)
		}
		if granted[0] && granted[1] {
			t.Fatalf("round %d: a mutex and a %s were both granted on one key", round, other.Kind)
		}
	}
}

// testStateReclaimed: keys locked in every way the backend offers, then
// released (or left to expire), leave nothing in the store after
// Harness.Reclaim: users lock per entity and per tick, so state left per
// key would grow without bound.
func testStateReclaimed(t testing.TB, h Harness) {
	if h.Stored == nil {
		t.Skip("Harness.Stored is not set: the store cannot be compared with its baseline")
	}
	prefix := uniqueKey(t) + ":"
	if got := h.Stored(t, prefix); len(got) > 0 {
		t.Fatalf("the store holds %v for a prefix no test used", got)
	}
	caps := h.NewBackend(t).Capabilities()
	c := newClient(t, h, distlock.WithTTL(10*time.Second))
	ctx := timeout(t, 60*time.Second)
	n := 0
	next := func() string { n++; return fmt.Sprintf("%s%d", prefix, n) }

	for _, u := range uses {
		if u.needs != nil && !u.needs(caps) {
			continue
		}
		for range 3 {
			l, err := u.take(ctx, c, next(), true)
			if err != nil {
				t.Fatalf("%s: %v", u.name, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock %s: %v", u.name, err)
			}
		}
	}
	// A waiter woken by a release, and a fair one if offered.
	for _, fairly := range []bool{false, true} {
		if fairly && !caps.Fair {
			continue
		}
		var opts []distlock.Option
		if fairly {
			opts = append(opts, distlock.WithFairness())
		}
		key := next()
		holder := mustLockIn(t, ctx, c.Mutex(key, opts...))
		got := make(chan error, 1)
		go func() {
			l, err := newClient(t, h).Mutex(key, opts...).Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond) // let it queue; the check holds either way
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
	// A lock whose holder vanished: it expires instead of being released.
	if _, err := c.Mutex(next(), distlock.WithTTL(h.ttl()), distlock.WithoutAutoRefresh()).TryLock(ctx); err != nil {
		t.Fatalf("TryLock: %v", err)
	}

	deadline := time.Now().Add(h.ttl() + h.reclaim())
	var left []string
	for {
		left = h.Stored(t, prefix)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	slices.Sort(left)
	if len(left) > 10 {
		left = append(left[:10], fmt.Sprintf("and %d more", len(left)-10))
	}
	t.Errorf("%d keys locked and released: the store still holds %v after %v", n, left, h.reclaim())
}
