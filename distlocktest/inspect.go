package distlocktest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// inspectChecks run for every backend; each also checks the kinds the
// backend claims.
var inspectChecks = []check{
	{"InspectFreeAndHeld", nil, testInspect},
	{"InspectNeverShowsOwners", nil, testInspectOwners},
	{"InspectReaders", readWrite, testInspectReaders},
	{"InspectPermits", semaphore, testInspectPermits},
}

// inspect returns what c says of key, or ends the test.
func inspect(t testing.TB, c *distlock.Client, key string) distlock.Info {
	t.Helper()
	info, err := c.Inspect(timeout(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

// checkHeld checks that info describes a key held by holds holdings of
// kind, the newest with token, whose lease is at most ttl.
func checkHeld(t testing.TB, info distlock.Info, kind distlock.Kind, holds int, token uint64, ttl time.Duration) {
	t.Helper()
	if !info.Held || info.Kind != kind || info.Holds != holds || info.Token != token {
		t.Errorf("Inspect: held %v, kind %v, %d holds, token %d; want held, %v, %d holds, token %d",
			info.Held, info.Kind, info.Holds, info.Token, kind, holds, token)
	}
	if info.TTL <= 0 || info.TTL > ttl {
		t.Errorf("Inspect: remaining lease %v; want in (0, %v]", info.TTL, ttl)
	}
}

func testInspect(t testing.TB, h Harness) {
	key := uniqueKey(t)
	c := newClient(t, h)
	if info := inspect(t, c, key); info.Held || info.Token != 0 || info.Holds != 0 {
		t.Errorf("Inspect of a key never locked: %+v; want free, token 0", info)
	}
	const ttl = 10 * time.Second
	l := mustLock(t, newClient(t, h, distlock.WithTTL(ttl), distlock.WithMetadata(map[string]string{"job": "nightly report"})).Mutex(key))
	info := inspect(t, c, key)
	checkHeld(t, info, distlock.KindMutex, 1, l.Token(), ttl)
	if info.Key != key {
		t.Errorf("Inspect: key %q; want %q", info.Key, key)
	}
	if info.Meta["job"] != "nightly report" || info.Meta["pid"] != strconv.Itoa(os.Getpid()) {
		t.Errorf("Inspect: metadata %v; want the holder's job and pid", info.Meta)
	}
	if err := l.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if info := inspect(t, c, key); info.Held || info.Token != l.Token() {
		t.Errorf("Inspect after Unlock: held %v, token %d; want free, with the last token %d", info.Held, info.Token, l.Token())
	}
}

// testInspectOwners: no owner token, nor re-entrant identity, appears in
// anything Inspect returns: whoever has one can release or enter the lock.
func testInspectOwners(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 5*time.Second)
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: owner("secret-owner")}, TTL: 10 * time.Second,
		Meta: map[string]string{"host": "inspected"}}
	if b.Capabilities().Reentrant {
		req.Reentry = owner("secret-identity")
	}
	acquire(t, ctx, b, req)
	info, err := b.Inspect(ctx, key)
	if err != nil || !info.Held {
		t.Fatalf("Inspect of a held key: %+v, %v", info, err)
	}
	shown := fmt.Sprintf("%#v", info)
	for _, secret := range []string{req.Owner, req.Reentry} {
		if secret != "" && strings.Contains(shown, secret) {
			t.Errorf("Inspect shows a secret of the holder (%q): %s", secret, shown)
		}
	}
}

func testInspectReaders(t testing.TB, h Harness) {
	key := uniqueKey(t)
	const ttl = 10 * time.Second
	rw := newClient(t, h, distlock.WithTTL(ttl)).RWMutex(key)
	ctx := timeout(t, 5*time.Second)
	r1, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	r2, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	c := newClient(t, h)
	checkHeld(t, inspect(t, c, key), distlock.KindRead, 2, max(r1.Token(), r2.Token()), ttl)
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	checkHeld(t, inspect(t, c, key), distlock.KindWrite, 1, w.Token(), ttl)
	_ = w.Unlock(ctx)
}

func testInspectPermits(t testing.TB, h Harness) {
	key := uniqueKey(t)
	const ttl = 10 * time.Second
	s := newClient(t, h, distlock.WithTTL(ttl)).Semaphore(key, 3)
	ctx := timeout(t, 5*time.Second)
	var last uint64
	for range 2 {
		p, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		defer func() { _ = p.Unlock(context.Background()) }()
		last = p.Token()
	}
	checkHeld(t, inspect(t, newClient(t, h), key), distlock.KindPermit, 2, last, ttl)
}
