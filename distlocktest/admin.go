package distlocktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// adminChecks test the operator's methods, List and Break, on every
// backend, with the kinds it claims.
var adminChecks = []check{
	{"ListHeldKeys", nil, testList},
	{"BreakFreesTheLock", nil, testBreak},
	{"BreakEveryHolding", nil, testBreakKinds},
}

func testList(t testing.TB, h Harness) {
	prefix := uniqueKey(t) + ":"
	const ttl = 10 * time.Second
	c := newClient(t, h, distlock.WithTTL(ttl), distlock.WithMetadata(map[string]string{"job": "listed"}))
	ctx := timeout(t, 10*time.Second)
	caps := c.Backend().Capabilities()
	tokens := map[string]uint64{}
	kinds := map[string]distlock.Kind{}
	hold := func(key string, kind distlock.Kind, l *distlock.Lock, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("taking %q: %v", key, err)
		}
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
		tokens[key], kinds[key] = l.Token(), kind
	}
	// A name with braces of its own, and a name that the prefix without
	// its last character would match.
	for _, name := range []string{"a", "{b}", "c:d"} {
		l, err := c.Mutex(prefix + name).TryLock(ctx)
		hold(prefix+name, distlock.KindMutex, l, err)
	}
	if caps.ReadWrite {
		l, err := c.RWMutex(prefix + "r").TryRLock(ctx)
		hold(prefix+"r", distlock.KindRead, l, err)
	}
	if caps.Semaphore {
		l, err := c.Semaphore(prefix+"s", 3).TryAcquire(ctx)
		hold(prefix+"s", distlock.KindPermit, l, err)
	}
	freed := mustLock(t, c.Mutex(prefix+"freed"))
	if err := freed.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	outside := mustLock(t, c.Mutex(prefix[:len(prefix)-1]+"-outside"))
	defer func() { _ = outside.Unlock(context.Background()) }()

	list, err := newClient(t, h).List(ctx, prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	var got, want []string
	for _, in := range list {
		got = append(got, in.Key)
	}
	for k := range tokens {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) keys: %q; want the held keys under the prefix, in order: %q", prefix, got, want)
	}
	for _, in := range list {
		if !in.Held || in.Kind != kinds[in.Key] || in.Token != tokens[in.Key] || in.Holds != 1 {
			t.Errorf("List: %q held %v, kind %v, token %d, %d holds; want held, %v, token %d, 1 hold",
				in.Key, in.Held, in.Kind, in.Token, in.Holds, kinds[in.Key], tokens[in.Key])
		}
		if in.TTL <= 0 || in.TTL > ttl {
			t.Errorf("List: %q remaining lease %v; want in (0, %v]", in.Key, in.TTL, ttl)
		}
		if in.Kind == distlock.KindMutex && in.Meta["job"] != "listed" {
			t.Errorf("List: %q metadata %v; want the holder's job", in.Key, in.Meta)
		}
	}
	all, err := newClient(t, h).List(ctx, "")
	if err != nil {
		t.Fatalf(`List(""): %v`, err)
	}
	if !slices.ContainsFunc(all, func(in distlock.Info) bool { return in.Key == prefix+"a" }) ||
		!slices.IsSortedFunc(all, func(a, b distlock.Info) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf(`List(""): %d keys, sorted %v; want every held key, %q among them, in order`,
			len(all), slices.IsSortedFunc(all, func(a, b distlock.Info) int { return strings.Compare(a.Key, b.Key) }), prefix+"a")
	}
}

// testBreak: Break frees a held lock at once, says what it freed, lets a
// waiter in, keeps tokens increasing, and the old holder learns it lost
// the lock.
func testBreak(t testing.TB, h Harness) {
	key := uniqueKey(t)
	const ttl = 10 * time.Second
	admin := newClient(t, h)
	ctx := timeout(t, 10*time.Second)
	if info, err := admin.Break(ctx, key); err != nil || info.Held {
		t.Fatalf("Break of a key never locked: %+v, %v; want free, no error", info, err)
	}
	l := mustLock(t, newClient(t, h, distlock.WithTTL(ttl), distlock.WithMetadata(map[string]string{"job": "stuck"})).Mutex(key))
	notify := admin.Backend().Capabilities().Notify
	type result struct {
		l   *distlock.Lock
		err error
	}
	got := make(chan result, 1)
	wctx, stopWaiter := context.WithCancel(ctx)
	defer stopWaiter()
	if notify {
		waiter := newClient(t, h, distlock.WithTTL(ttl)).Mutex(key)
		go func() { // reports only through got: it may outlive a failed check
			w, err := waiter.Lock(wctx)
			got <- result{w, err}
		}()
		time.Sleep(100 * time.Millisecond) // let the waiter wait
	}
	info, err := admin.Break(ctx, key)
	if err != nil {
		stopWaiter()
		t.Fatalf("Break: %v", err)
	}
	if !info.Held || info.Token != l.Token() || info.Kind != distlock.KindMutex || info.Meta["job"] != "stuck" {
		t.Errorf("Break returned %+v; want the holding it ended (token %d, job stuck)", info, l.Token())
	}
	var next *distlock.Lock
	if notify {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("Lock by a waiter: %v", r.err)
			}
			next = r.l
		case <-time.After(5 * time.Second):
			stopWaiter()
			if r := <-got; r.l != nil {
				_ = r.l.Unlock(context.Background())
			}
			t.Fatalf("a waiter was still waiting 5s after Break (lease %v)", ttl)
		}
	} else {
		next, err = newClient(t, h).Mutex(key).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock after Break: %v", err)
		}
	}
	defer func() { _ = next.Unlock(context.Background()) }()
	if next.Token() <= l.Token() {
		t.Errorf("token after Break %d; want greater than the broken holding's %d", next.Token(), l.Token())
	}
	if err := l.Refresh(ctx, ttl); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Refresh by the broken holder: %v; want ErrLockLost", err)
	}
	if !waitDone(l, time.Second) {
		t.Error("the broken holder's Done stayed open after a refused renewal")
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock by the broken holder: %v; want ErrLockLost", err)
	}
	if info := inspect(t, admin, key); !info.Held || info.Token != next.Token() {
		t.Errorf("Inspect after Break and a new Lock: %+v; want held with token %d", info, next.Token())
	}
}

// testBreakKinds: Break ends all holds of a re-entrant lease, all readers
// and all permits, on the backends that offer them, and only that key's.
func testBreakKinds(t testing.TB, h Harness) {
	b := h.NewBackend(t)
	caps := b.Capabilities()
	ctx := timeout(t, 10*time.Second)
	const ttl = 10 * time.Second
	type holding struct {
		reqs  []driver.Request
		other driver.Request // refused while they hold, granted after Break
	}
	lease := func(key string, kind driver.Kind) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: owner("holder"), Kind: kind}, TTL: ttl, Limit: 2}
	}
	var cases []holding
	key := uniqueKey(t)
	cases = append(cases, holding{reqs: []driver.Request{lease(key+":m", driver.Exclusive)}, other: lease(key+":m", driver.Exclusive)})
	if caps.Reentrant {
		r1, r2 := lease(key+":re", driver.Exclusive), lease(key+":re", driver.Exclusive)
		r1.Reentry = owner("identity")
		r2.Reentry = r1.Reentry
		cases = append(cases, holding{reqs: []driver.Request{r1, r2}, other: lease(key+":re", driver.Exclusive)})
	}
	if caps.ReadWrite {
		cases = append(cases, holding{reqs: []driver.Request{lease(key+":rw", driver.Read), lease(key+":rw", driver.Read)}, other: lease(key+":rw", driver.Write)})
	}
	if caps.Semaphore {
		cases = append(cases, holding{reqs: []driver.Request{lease(key+":sem", driver.Permit), lease(key+":sem", driver.Permit)}, other: lease(key+":sem", driver.Permit)})
	}
	untouched := lease(key+":untouched", driver.Exclusive)
	acquire(t, ctx, b, untouched)
	for _, c := range cases {
		acquire(t, ctx, b, c.reqs...)
		if g, err := b.Acquire(ctx, c.other); err != nil || g.Acquired {
			t.Fatalf("Acquire(%v) of %q while held: %+v, %v; want refused", c.other.Kind, c.other.Key, g, err)
		}
		info, err := b.Break(ctx, c.other.Key)
		if err != nil || !info.Held || info.Holds != len(c.reqs) {
			t.Errorf("Break(%q): %+v, %v; want the %d holds it ended", c.other.Key, info, err, len(c.reqs))
		}
		for _, r := range c.reqs {
			if _, err := b.Refresh(ctx, r.Lease, ttl); !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("Refresh of a hold of %q after Break: %v; want ErrNotHeld", r.Key, err)
			}
		}
		acquire(t, ctx, b, c.other)
	}
	if _, err := b.Refresh(ctx, untouched.Lease, ttl); err != nil {
		t.Errorf("Refresh of another key's lock after Break: %v; want it untouched", err)
	}
}
