package distlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	var stall atomic.Bool     // then hold attempts until their ctx ends
	b := &fault{Backend: memlock.New(), acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		if refusals.Add(-1) >= 0 {
			return driver.Grant{Guarded: true, RetryAfter: 40 * time.Second}, nil
		}
		if stall.Load() {
			// Cut short by a deadline of its own, which a caller's
			// wrapper may set at ctx's and which can fire first.
			cut, cancel := context.WithDeadline(ctx, time.Now().Add(20*time.Millisecond))
			defer cancel()
			<-cut.Done()
			return driver.Grant{}, cut.Err()
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

	// The guard's answer is the last one heard when ctx ends during
	// the next attempt: the error still names it.
	refusals.Store(1)
	stall.Store(true)
	short, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Mutex("fresh").Lock(short)
	if !errors.Is(err, distlock.ErrRestartGuard) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock whose ctx ended in the attempt after the guard's refusal: %v; want ErrRestartGuard and the deadline", err)
	}
	stall.Store(false)

	refusals.Store(2)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := c.Mutex("fresh").Lock(wait)
	if err != nil {
		t.Fatalf("Lock once the guard lets go: %v", err)
	}
	_ = l.Unlock(ctx)
}

func held(t *testing.T, b driver.Backend, key string) bool {
	t.Helper()
	info, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

func TestTryLockLeavesNothingAfterLostReply(t *testing.T) {
	f := memFault()
	f.acquire = failAcquires(1, true, errInjected)
	_, err := distlock.New(f).Mutex("k").TryLock(context.Background())
	if !errors.Is(err, errInjected) {
		t.Fatalf("TryLock: %v; want the backend's error", err)
	}
	if held(t, f, "k") {
		t.Errorf("TryLock failed but left its lock behind")
	}
}

func TestWorthlessGrantRefused(t *testing.T) {
	f := memFault()
	f.acquire = func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		g, err := next(ctx, req)
		if g.Acquired {
			g.ValidFor = -time.Millisecond
		}
		return g, err
	}
	_, err := distlock.New(f).Mutex("k").TryLock(context.Background())
	if err == nil {
		t.Fatal("TryLock accepted a grant with no validity")
	}
	if held(t, f, "k") {
		t.Errorf("worthless grant left a lock behind")
	}
}

func TestNilArguments(t *testing.T) {
	var nilCtx context.Context
	m := distlock.New(memlock.New()).Mutex("k")
	if _, err := m.Lock(nilCtx); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("Lock(nil): %v", err)
	}
	if _, err := m.TryLock(nilCtx); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("TryLock(nil): %v", err)
	}
	if _, err := distlock.Open(nilCtx, "mem://"); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("Open(nil): %v", err)
	}
	var nilClient *distlock.Client
	if _, err := nilClient.Mutex("k").TryLock(context.Background()); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("nil client: %v", err)
	}
	var nilMutex *distlock.Mutex
	if _, err := nilMutex.Lock(context.Background()); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("nil Mutex: %v", err)
	}
}

// TestBackendRefuses: a request the backend refuses outright fails Lock at
// once, rather than being retried until ctx ends.
func TestBackendRefuses(t *testing.T) {
	for _, tc := range []struct{ err, want error }{
		{fmt.Errorf("backend: key has a character it cannot store: %w", driver.ErrInvalidKey), distlock.ErrInvalidKey},
		{fmt.Errorf("backend: no such kind: %w", errors.ErrUnsupported), errors.ErrUnsupported},
		{fmt.Errorf("backend: owner too long: %w", driver.ErrInvalidRequest), distlock.ErrInvalidArgument},
		{fmt.Errorf("backend: set up wrongly: %w", driver.ErrInvalidBackend), distlock.ErrInvalidBackend},
		// A TTL above the backend's maximum, whatever the TTL: the
		// default one is refused here by a backend whose maximum is 10s.
		{fmt.Errorf("backend: %w", &driver.TTLTooLongError{TTL: distlock.DefaultTTL, Max: 10 * time.Second}), distlock.ErrInvalidTTL},
	} {
		// The backend refuses every request, as one refuses a key it
		// cannot store or a kind it does not offer.
		c := distlock.New(&fault{Backend: memlock.New(), acquire: func(context.Context, driver.Request, acquireFunc) (driver.Grant, error) {
			return driver.Grant{}, tc.err
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.Mutex("k").Lock(ctx); !errors.Is(err, tc.want) || ctx.Err() != nil {
			t.Errorf("Lock refused with %v: %v (ctx: %v); want %v at once", tc.err, err, ctx.Err(), tc.want)
		}
		if _, err := c.Mutex("k").TryLock(ctx); !errors.Is(err, tc.want) {
			t.Errorf("TryLock refused with %v: %v; want %v", tc.err, err, tc.want)
		}
		cancel()
	}
}
