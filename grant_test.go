package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// slowGrant delivers every grant late, after its validity has run out, as
// a slow network or a long pause of the process would.
type slowGrant struct {
	driver.Backend
	delay, valid time.Duration
}

func (s slowGrant) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := s.Backend.Acquire(ctx, req)
	time.Sleep(s.delay)
	if g.Acquired {
		g.ValidFor = s.valid
	}
	return g, err
}

// TestGrantArrivingExpired: a grant whose validity ran out while its reply
// was on its way is no lock at all. TryLock must not hand it out as held,
// and must give it back.
func TestGrantArrivingExpired(t *testing.T) {
	be := memlock.New()
	c := distlock.New(slowGrant{be, 30 * time.Millisecond, 10 * time.Millisecond}, distlock.WithTTL(time.Minute))
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
