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

// TestDoneClosesAtDeadlineDuringSlowUnlock: a release that outlasts the
// lease must not keep Done open past ValidUntil; code working under
// Lock.Context in another goroutine has to stop at the deadline.
func TestDoneClosesAtDeadlineDuringSlowUnlock(t *testing.T) {
	// The release takes until hold is closed, like one sent to a paused
	// server.
	hold := make(chan struct{})
	b := &fault{Backend: memlock.New(), release: func(ctx context.Context, l driver.Lease, next releaseFunc) error {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return next(ctx, l)
	}}
	l, err := distlock.New(b).Mutex("k", distlock.WithTTL(100*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(context.Background()) }()
	deadline := l.ValidUntil()
	select {
	case <-l.Done():
		if late := time.Since(deadline); late < 0 {
			t.Fatalf("Done closed %v before the deadline, while the release was still pending", -late)
		}
	case <-time.After(time.Until(deadline) + 2*time.Second):
		t.Fatal("Done still open 2s past ValidUntil while Unlock waits for the release")
	}
	if !errors.Is(l.Err(), distlock.ErrLockExpired) {
		t.Errorf("Err %v, want ErrLockExpired", l.Err())
	}
	close(hold)
	// The store let the key expire meanwhile, so the release finds it gone.
	if err := <-unlocked; err != nil && !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock: %v, want nil or ErrLockLost", err)
	}
}
