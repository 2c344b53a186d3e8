package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// abandon releases what an attempt with an unknown outcome may have taken,
// and leaves the key's queue, detached from ctx, which is usually what
// ended the attempt. It waits for one release, so that a waiter that gave
// up has left the line when Lock returns; after an attempt of unknown
// outcome (ambiguous) when ctx has ended, for at most abandonGrace: the
// caller's deadline has passed, and a backend that failed to answer must
// not hold the call much beyond it. A release whose outcome is unknown
// is repeated in the background, as release does, rather than
// holding up a call that already failed.
func (d *desc) abandon(ctx context.Context, l driver.Lease, ambiguous bool) {
	first := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.releaseTimeout)
		err := d.c.backend.Release(rctx, l)
		cancel()
		first <- err
		if !settled(err) {
			_ = d.release(ctx, l) // best effort: the lease expires anyway
		}
	}()
	if !(ambiguous && ctx.Err() != nil) {
		<-first
		return
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	}
}

// settled reports whether a release that returned err has a known
// outcome: done, not held, or refused in a way a repeat would meet again.
func settled(err error) bool {
	return err == nil || isNotHeld(err) || refused(err)
}

// release ends the holding l on the backend. A release is idempotent, so
// it is repeated, with a short backoff, until its outcome is known: nil,
// ErrNotHeld, or a refusal that a repeat would meet again. It runs
// detached from ctx, whose cancellation must not leave the key held for a
// whole lease (a scheduler that cancels a job's context at shutdown does
// just that mid-call), bounded by the release timeout or ctx's deadline,
// whichever is later. It returns the last attempt's error.
func (d *desc) release(ctx context.Context, l driver.Lease) error {
	bound := d.opts.releaseTimeout
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && time.Until(dl) > bound {
		bound = time.Until(dl)
	}
	rctx := newReleaseCtx(ctx, bound)
	defer rctx.stop()
	var t *time.Timer
	var answer error // the last error that came from the backend, not the bound
	for n := 1; ; n++ {
		err := d.c.backend.Release(rctx, l)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			answer = err
		}
		if settled(err) || rctx.Err() != nil {
			if t != nil {
				t.Stop()
			}
			return releaseFailed(err, answer)
		}
		delay := releaseBackoff.Next(n)
		if dl, _ := rctx.Deadline(); time.Until(dl) <= delay {
			return releaseFailed(err, answer) // no time for another attempt
		}
		if t == nil {
			t = time.NewTimer(delay)
		} else {
			t.Reset(delay)
		}
		select {
		case <-t.C:
		case <-rctx.Done():
			return releaseFailed(err, answer)
		}
	}
}

// releaseFailed is the error of a release whose last attempt failed with
// err. When that attempt only ran out of time, the backend's last real
// answer (a refused connection, say) is what the caller needs to hear, so
// it is named beside the deadline.
func releaseFailed(err, answer error) error {
	if err == nil || answer == nil || err == answer || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w (the attempt before: %w)", err, answer)
}

// releaseBackoff paces the repeats of a release whose outcome is unknown:
// soon enough to end a lock within a few round trips of a blip's end.
var releaseBackoff = ExponentialBackoff(5*time.Millisecond, 250*time.Millisecond)

// abandonGrace is how long a call whose ctx has ended waits for the
// release of an attempt of unknown outcome: a backend that answers does so
// well within it, so that the call leaves nothing behind.
const abandonGrace = 100 * time.Millisecond
