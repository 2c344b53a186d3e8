package distlock_test

import (
	"context"
	"errors"
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
