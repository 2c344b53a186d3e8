package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
)

// TestLongTTLRefusalSaysWhatToDo: a TTL above the Redis backend's maximum
// lease is refused with an error that is an invalid TTL and says what to
// do instead: rely on the watchdog, or raise the maximum.
func TestLongTTLRefusalSaysWhatToDo(t *testing.T) {
	_, b := redisBackend(t)
	c := distlock.New(b)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, distlock.ErrInvalidTTL) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v; want ErrInvalidTTL and ErrUnsupported", what, err)
		}
		if err == nil {
			return
		}
		for _, want := range []string{"2h0m0s", "watchdog renews", "WithMaxTTL"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", what, err, want)
			}
		}
	}
	l, err := c.Mutex("long", distlock.WithTTL(2*time.Hour)).TryLock(ctx)
	if l != nil {
		_ = l.Unlock(ctx)
	}
	check("TryLock", err)

	l, err = c.Mutex("long").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	check("Refresh", l.Refresh(ctx, 2*time.Hour))
}
