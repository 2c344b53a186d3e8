package distlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

func TestReentrantMutex(t *testing.T) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		seen []string // the re-entrant identities the backend receives
	)
	b := &fault{Backend: memlock.New(), acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		mu.Lock()
		seen = append(seen, req.Reentry)
		mu.Unlock()
		return next(ctx, req)
	}}
	c := distlock.New(b)
	id := distlock.NewOwnerID()
	outer, err := c.Mutex("k").Lock(distlock.ContextWithOwner(ctx, id))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Mutex("k", distlock.WithOwner(id)).TryLock(ctx)
	if err != nil {
		t.Fatalf("a nested TryLock by the same identity: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Errorf("nested hold token %d; want %d", inner.Token(), outer.Token())
	}
	if _, err := c.Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Errorf("TryLock without the identity: %v; want ErrNotObtained", err)
	}
	// The option wins over the context.
	other := distlock.ContextWithOwner(ctx, distlock.NewOwnerID())
	if l, err := c.Mutex("k", distlock.WithOwner(id)).TryLock(other); err != nil {
		t.Errorf("TryLock with WithOwner(id) and another identity in ctx: %v; want the option's identity", err)
	} else {
		_ = l.Unlock(ctx)
	}
	info, err := c.Inspect(ctx, "k")
	if err != nil || info.Holds != 2 {
		t.Errorf("Inspect: %+v, %v; want 2 holds", info, err)
	}
	for _, l := range []*distlock.Lock{outer, inner} {
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	}
	if info, _ := c.Inspect(ctx, "k"); info.Held {
		t.Errorf("held after every hold was unlocked")
	}
	// The backend never sees the secret, only a digest, the same each time.
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 || seen[0] == "" || seen[0] != seen[1] {
		t.Fatalf("identities sent: %q; want one digest, the same for both calls", seen)
	}
	if strings.Contains(seen[0], id.Secret()) {
		t.Errorf("the backend received the secret itself: %q", seen[0])
	}
}

func TestReentrantMisuse(t *testing.T) {
	ctx := context.Background()
	id := distlock.NewOwnerID()
	withID := distlock.ContextWithOwner(ctx, id)
	c := distlock.New(memlock.New())
	plain := distlock.New(plainMem())
	for name, tc := range map[string]struct {
		try  func() (*distlock.Lock, error)
		want error
	}{
		"WithOwner on a backend without re-entrancy": {func() (*distlock.Lock, error) {
			return plain.Mutex("k", distlock.WithOwner(id)).TryLock(ctx)
		}, errors.ErrUnsupported},
		"identity in ctx on a backend without re-entrancy": {func() (*distlock.Lock, error) {
			return plain.Mutex("k").Lock(withID)
		}, errors.ErrUnsupported},
		"WithOwner on an RWMutex": {func() (*distlock.Lock, error) {
			return c.RWMutex("rw", distlock.WithOwner(id)).TryLock(ctx)
		}, errors.ErrUnsupported},
		"WithOwner on a Semaphore": {func() (*distlock.Lock, error) {
			return c.Semaphore("s", 2, distlock.WithOwner(id)).TryAcquire(ctx)
		}, errors.ErrUnsupported},
		"zero OwnerID option": {func() (*distlock.Lock, error) {
			return c.Mutex("k", distlock.WithOwner(distlock.OwnerID{})).TryLock(ctx)
		}, distlock.ErrInvalidArgument},
		"zero OwnerID in ctx": {func() (*distlock.Lock, error) {
			return c.Mutex("k").TryLock(distlock.ContextWithOwner(ctx, distlock.OwnerID{}))
		}, distlock.ErrInvalidArgument},
	} {
		if l, err := tc.try(); !errors.Is(err, tc.want) {
			if l != nil {
				_ = l.Unlock(ctx)
			}
			t.Errorf("%s: %v; want %v", name, err, tc.want)
		}
	}
	// RWMutex and Semaphore ignore an identity carried by the context.
	for name, try := range map[string]func() (*distlock.Lock, error){
		"RWMutex":   func() (*distlock.Lock, error) { return c.RWMutex("rw").TryLock(withID) },
		"Semaphore": func() (*distlock.Lock, error) { return c.Semaphore("s", 1).TryAcquire(withID) },
	} {
		l, err := try()
		if err != nil {
			t.Errorf("%s with an identity in ctx: %v; want it ignored", name, err)
			continue
		}
		if _, err := try(); !errors.Is(err, distlock.ErrNotObtained) {
			t.Errorf("%s taken twice with one identity in ctx: %v; want ErrNotObtained (no re-entrancy)", name, err)
		}
		_ = l.Unlock(ctx)
	}
}

func TestOwnerIDHidesItsSecret(t *testing.T) {
	id := distlock.NewOwnerID()
	secret := id.Secret()
	if len(secret) != 32 {
		t.Fatalf("Secret() = %q; want 32 hex digits", secret)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("locking", "owner", id)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("locking", "owner", id)
	js, _ := json.Marshal(struct{ Owner distlock.OwnerID }{id})
	for _, shown := range []string{
		fmt.Sprint(id), fmt.Sprintf("%v %+v %#v %s %q", id, id, id, id, id), id.String(),
		logs.String(), string(js),
	} {
		if strings.Contains(shown, secret) {
			t.Errorf("the secret shows in %q", shown)
		}
	}
	if distlock.NewOwnerID() == id {
		t.Errorf("two NewOwnerID calls returned the same identity")
	}
	back, err := distlock.ParseOwnerID(secret)
	if err != nil || back != id {
		t.Errorf("ParseOwnerID(Secret()) = %v, %v; want the identity back", back, err)
	}
	for _, bad := range []string{"", "xyz", secret[:31], secret + "0", strings.ToUpper(secret)} {
		if _, err := distlock.ParseOwnerID(bad); !errors.Is(err, distlock.ErrInvalidArgument) {
			t.Errorf("ParseOwnerID(%q): %v; want ErrInvalidArgument", bad, err)
		}
	}
	if got, ok := distlock.OwnerFromContext(distlock.ContextWithOwner(context.Background(), id)); !ok || got != id {
		t.Errorf("OwnerFromContext: %v, %v", got, ok)
	}
	if _, ok := distlock.OwnerFromContext(context.Background()); ok {
		t.Errorf("OwnerFromContext of a plain context reports an identity")
	}
}

// ExampleOwnerID hands a held lock to another worker (which could be
// another process, given the secret): it enters the lock with the same
// identity, and the lease never lapses in between.
func ExampleOwnerID() {
	ctx := context.Background()
	c := distlock.New(memlock.New())

	id := distlock.NewOwnerID()
	first, _ := c.Mutex("migration").Lock(distlock.ContextWithOwner(ctx, id))

	// The other worker receives id.Secret() over a trusted channel.
	handed, _ := distlock.ParseOwnerID(id.Secret())
	second, err := c.Mutex("migration", distlock.WithOwner(handed)).TryLock(ctx)
	fmt.Println("entered:", err == nil, "same token:", second.Token() == first.Token())

	first.Unlock(ctx) // the first worker leaves; the second still holds
	_, err = c.Mutex("migration").TryLock(ctx)
	fmt.Println("others still excluded:", errors.Is(err, distlock.ErrNotObtained))
	second.Unlock(ctx)
	// Output:
	// entered: true same token: true
	// others still excluded: true
}
