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
	var owner string // the owner token of the last acquisition
	spy := &fault{Backend: memlock.New(), acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		owner = req.Owner
		return next(ctx, req)
	}}
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
		if strings.Contains(h, owner) || strings.Contains(owner, h) {
			t.Errorf("Holder %q shows the owner token %q", h, owner)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
