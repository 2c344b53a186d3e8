package distlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// TestHolder: a holding's Holder is fixed, differs between holdings, and
// does not contain the owner token (a bearer secret) that the backend
// sees.
func TestHolder(t *testing.T) {
	spy := &ownerSpy{Backend: memlock.New()}
	c := distlock.New(spy)
	ctx := context.Background()
	seen := map[string]bool{}
	for range 3 {
		l, err := c.Mutex("k").TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h := l.Holder()
		if len(h) != 32 || strings.Trim(h, "0123456789abcdef") != "" || h != l.Holder() {
			t.Errorf("Holder() = %q; want 32 hex digits, the same on every call", h)
		}
		if seen[h] {
			t.Errorf("Holder %q repeated across holdings", h)
		}
		seen[h] = true
		if strings.Contains(h, spy.owner) || strings.Contains(spy.owner, h) {
			t.Errorf("Holder %q shows the owner token %q", h, spy.owner)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// ownerSpy records the owner token of the last acquisition.
type ownerSpy struct {
	driver.Backend
	owner string
}

func (s *ownerSpy) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	s.owner = req.Owner
	return s.Backend.Acquire(ctx, req)
}
