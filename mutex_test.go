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

// TestGrantArrivingExpired: a grant whose validity ran out while its reply
// was on its way is no lock at all. TryLock must not hand it out as held,
// and must give it back.
func TestGrantArrivingExpired(t *testing.T) {
	be := memlock.New()
	// Every grant arrives late, after its validity has run out, as over a
	// slow network or after a long pause of the process.
	slow := &fault{Backend: be, acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		g, err := next(ctx, req)
		time.Sleep(30 * time.Millisecond)
		if g.Acquired {
			g.ValidFor = 10 * time.Millisecond
		}
		return g, err
	}}
	c := distlock.New(slow, distlock.WithTTL(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Mutex("late").TryLock(ctx)
	if err == nil {
		t.Fatalf("TryLock returned a handle (Err %v, ValidUntil %v ago) for a grant that was over when it arrived",
			l.Err(), time.Since(l.ValidUntil()))
	}
	if !errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, distlock.ErrLockExpired) {
		t.Errorf("TryLock: %v; want ErrNotObtained and ErrLockExpired", err)
	}
	if _, err := distlock.New(be).Mutex("late").TryLock(ctx); err != nil {
		t.Errorf("TryLock by another client: %v; want the expired grant given back", err)
	}
}

// TestShortGrantExtended: a lease granted for much less than the TTL is
// extended at once, by the watchdog, or, without it, before Lock returns,
// so the holder has the TTL it asked for.
func TestShortGrantExtended(t *testing.T) {
	const ttl = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, auto := range []bool{true, false} {
		var grants, refreshes atomic.Int32
		opts := []distlock.Option{distlock.WithTTL(ttl)}
		if !auto {
			opts = append(opts, distlock.WithoutAutoRefresh())
		}
		// The first lease is granted for a tenth of the TTL asked for, as
		// a release that hands a lock over to a waiter does.
		short := &fault{Backend: memlock.New(),
			acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
				g, err := next(ctx, req)
				if g.Acquired && grants.Add(1) == 1 {
					g.ValidFor = req.TTL / 10
				}
				return g, err
			},
			refresh: func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
				refreshes.Add(1)
				return next(ctx, l, ttl)
			}}
		c := distlock.New(short, opts...)
		l, err := c.Mutex("short").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if auto {
			// Renewing within a third of the short lease would wait 2s.
			for deadline := time.Now().Add(time.Second); refreshes.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		if left := time.Until(l.ValidUntil()); left < ttl/2 {
			t.Errorf("auto-refresh %v: the lease ends in %v after %d grants and %d renewals; want about the TTL, %v",
				auto, left, grants.Load(), refreshes.Load(), ttl)
		}
		_ = l.Unlock(ctx)
	}
}

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
