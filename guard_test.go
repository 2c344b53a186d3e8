package distlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// TestRestartGuardIsItsOwnOutcome: a guard's refusal is not reported as
// a holder: TryLock says what it is and how to end it, Lock waits it out
// (and says so if ctx ends first), the log says so at Warn.
func TestRestartGuardIsItsOwnOutcome(t *testing.T) {
	t.Parallel()
	// A restart guard refuses the next attempts, as a Redis server that
	// may have lost data does.
	var refusals atomic.Int32 // attempts still to refuse
	b := &fault{Backend: memlock.New(), acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		if refusals.Add(-1) >= 0 {
			return driver.Grant{Guarded: true, RetryAfter: 40 * time.Second}, nil
		}
		return next(ctx, req)
	}}
	var logged bytes.Buffer
	c := distlock.New(b, distlock.WithLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx := context.Background()

	refusals.Store(1)
	_, err := c.Mutex("fresh").TryLock(ctx)
	if !errors.Is(err, distlock.ErrRestartGuard) || !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("TryLock refused by the guard: %v; want ErrRestartGuard wrapping ErrNotObtained", err)
	}
	for _, want := range []string{`"fresh"`, "40s", "DeclareFresh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("TryLock's error %q does not say %s", err, want)
		}
	}
	if !strings.Contains(logged.String(), "outcome=guarded") {
		t.Errorf("the log at Warn does not show the guard: %q", logged.String())
	}

	refusals.Store(1 << 20)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Mutex("fresh").Lock(short)
	if !errors.Is(err, distlock.ErrRestartGuard) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock whose ctx ended behind the guard: %v; want ErrRestartGuard and the deadline", err)
	}

	refusals.Store(2)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := c.Mutex("fresh").Lock(wait)
	if err != nil {
		t.Fatalf("Lock once the guard lets go: %v", err)
	}
	_ = l.Unlock(ctx)
}
