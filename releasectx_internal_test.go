package distlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func TestReleaseCtxKeepsValuesNotCancellation(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancel()
	c := newReleaseCtx(parent, time.Minute)
	defer c.stop()
	if c.Value(ctxKey{}) != "v" {
		t.Errorf("Value = %v, want the parent's", c.Value(ctxKey{}))
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err = %v after the parent's cancellation, want nil", err)
	}
	select {
	case <-c.Done():
		t.Error("Done closed with the parent")
	default:
	}
	if dl, ok := c.Deadline(); !ok || time.Until(dl) < 30*time.Second {
		t.Errorf("Deadline = %v, %v; want about a minute from now", dl, ok)
	}
}

func TestReleaseCtxEndsAtItsDeadline(t *testing.T) {
	c := newReleaseCtx(context.Background(), 20*time.Millisecond)
	defer c.stop()
	done := c.Done()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done still open 10s after a 20ms deadline")
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
	c.stop()
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err after stop = %v, want it to stay DeadlineExceeded", err)
	}

	// Asked only after its deadline, without a Done made before: ended all
	// the same, and Done closed at once.
	late := newReleaseCtx(context.Background(), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if err := late.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err past the deadline = %v, want DeadlineExceeded", err)
	}
	select {
	case <-late.Done():
	default:
		t.Error("Done open past the deadline")
	}
}

func TestReleaseCtxStopCancels(t *testing.T) {
	for _, made := range []bool{true, false} {
		c := newReleaseCtx(context.Background(), time.Minute)
		var done <-chan struct{}
		if made {
			done = c.Done()
		}
		fired := make(chan struct{})
		stopAfter := context.AfterFunc(c, func() { close(fired) })
		c.stop()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("made=%v: Err after stop = %v, want Canceled", made, err)
		}
		if done == nil {
			done = c.Done()
		}
		select {
		case <-done:
		default:
			t.Errorf("made=%v: Done open after stop", made)
		}
		select {
		case <-fired:
		case <-time.After(10 * time.Second):
			t.Errorf("made=%v: context.AfterFunc did not run after stop", made)
		}
		stopAfter()
	}
}

// Done asked for the first time past the deadline, with nothing asked
// before: closed, once.
func TestReleaseCtxDoneFirstPastDeadline(t *testing.T) {
	c := newReleaseCtx(context.Background(), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	select {
	case <-c.Done():
	default:
		t.Error("Done open past the deadline")
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
	c.stop()
}
