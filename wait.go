package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// lock is [Mutex.Lock] for a lock of any kind: it takes the lock,
// waiting as long as it takes, until ctx is done.
func (d *desc) lock(ctx context.Context) (_ *Lock, lockErr error) {
	req, err := d.request(ctx)
	if err != nil {
		return nil, err
	}
	if req.Fair || req.Kind == driver.Write {
		// A waiter in line (a fair one, or a writer holding readers off)
		// renews its place with every attempt; the place outlives a few
		// missed attempts, not a vanished waiter for long.
		req.Queue = 2*d.opts.safetyPoll + time.Second
	}
	cl := d.startCall()
	if inLine(req) {
		l, err := d.c.lines.enter(ctx, d.key)
		if err != nil {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, d.key, err))
		}
		defer d.c.lines.leave(d.key, l)
	}
	w := wait{d: d, req: req}
	if d.c.caps.Notify {
		w.marker, _ = d.c.backend.(driver.MarkWatcher)
	}
	defer w.stop()
	bound := false
	for {
		if w.marker != nil && w.watch == nil {
			w.mark = w.marker.WatchMark(d.key) // before the attempt: see sleep
		}
		start := time.Now()
		g, err := d.c.backend.Acquire(ctx, req)
		cl.attempt(ctx, start, g, err)
		w.heard(ctx, g, err)
		switch {
		case refused(err):
			if req.Queue > 0 || w.ambiguous {
				d.abandon(ctx, req.Lease, w.ambiguous) // as when giving up below
			}
			return nil, cl.failed(ctx, d.refusal(err))
		case err == nil && g.Acquired:
			if d.opts.autoRefresh || !shortGrant(g, req.TTL) {
				return d.newLock(ctx, req.Lease, start, g, w.ambiguous, &cl)
			}
			// Nothing will renew the short lease: ask once more, which
			// extends the holding to the TTL. If that fails, the short
			// lease is still the caller's.
			again := time.Now()
			g2, err2 := d.c.backend.Acquire(ctx, req)
			cl.attempt(ctx, again, g2, err2)
			switch {
			case err2 != nil:
				return d.newLock(ctx, req.Lease, start, g, w.ambiguous, &cl)
			case g2.Acquired:
				return d.newLock(ctx, req.Lease, again, g2, w.ambiguous, &cl)
			}
			g = g2 // gone meanwhile: wait again
		}
		if !bound {
			// About to wait: Close of the client ends the wait. The
			// first attempt, most often the only one, costs nothing.
			var stop func()
			ctx, stop = d.c.held.bind(ctx)
			defer stop()
			defer func() { lockErr = closedErr(ctx, lockErr) }()
			bound = true
		}
		if w.sleep(ctx, g, err) {
			continue
		}
		if req.Queue > 0 || w.ambiguous {
			// Leave the line, withdraw a writer's claim, and give back a
			// grant that a lost reply may have made.
			d.abandon(ctx, req.Lease, w.ambiguous)
		}
		if w.guard != nil {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %w", guardError(d.key, *w.guard), ctx.Err()))
		}
		if w.lastErr != nil {
			return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w (last error: %w)", ErrNotObtained, d.key, ctx.Err(), w.lastErr))
		}
		return nil, cl.failed(ctx, fmt.Errorf("%w: %q: %w", ErrNotObtained, d.key, ctx.Err()))
	}
}

// wait is the state of one waiting Lock between its attempts.
type wait struct {
	d         *desc
	req       driver.Request
	watch     driver.Watch // nil until the first contention, or without Notify
	marker    driver.MarkWatcher
	mark      uint64 // what the watches had heard before the last attempt
	lastErr   error
	guard     *driver.Grant // the last answer, if the restart guard gave it
	ambiguous bool          // an attempt's outcome is unknown
	timer     *time.Timer
	backoffN  int
}

// sleep waits after an attempt that returned g and err, until the next
// attempt is due or a release is notified. It reports false when ctx ended.
func (w *wait) sleep(ctx context.Context, g driver.Grant, err error) bool {
	opts := &w.d.opts
	var delay time.Duration
	switch {
	case err != nil:
		w.ambiguous = true
		w.noteErr(ctx, err)
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	case w.watch == nil && w.d.c.caps.Notify:
		// Subscribe on first contention, then retry at once: a release
		// between the attempt and the subscription is caught by that
		// retry, and every later one by the watch. The retry is skipped
		// when the backend can tell that no release went unheard: the
		// key's subscription (another waiter's, or a recent one's) was
		// live before the attempt, and has carried nothing since.
		turn := ""
		if w.req.Fair {
			turn = w.req.Owner // wake only when it is this waiter's turn
		}
		var (
			watch  driver.Watch
			missed = true
			werr   error
		)
		if w.marker != nil {
			watch, missed, werr = w.marker.WatchSince(ctx, w.d.key, turn, w.mark)
		} else {
			watch, werr = w.d.c.backend.Watch(ctx, w.d.key, turn)
		}
		if werr == nil {
			w.watch = watch
			if missed {
				return true
			}
			delay = opts.safetyPoll
			break
		}
		w.noteErr(ctx, werr)
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	case w.watch != nil:
		delay = opts.safetyPoll
	default:
		w.backoffN++
		delay = opts.backoff.Next(w.backoffN)
	}
	if err == nil && g.RetryAfter > 0 && delay > g.RetryAfter {
		delay = g.RetryAfter
	}
	if w.req.Queue > 0 && delay > w.req.Queue/3 {
		delay = w.req.Queue / 3
	}
	if ctx.Err() != nil {
		return false
	}
	if w.timer == nil {
		w.timer = time.NewTimer(delay)
	} else {
		w.timer.Reset(delay)
	}
	var notified <-chan struct{}
	if w.watch != nil {
		notified = w.watch.C()
	}
	select {
	case <-w.timer.C:
		return true
	case <-notified:
		return true
	case <-ctx.Done():
		return false
	}
}

// heard keeps the restart guard's refusal as what the wait last heard from
// the backend, until another answer or an error other than ctx's end
// replaces it: a wait that ends while an attempt is in flight still says
// that the guard, not a holder, kept the lock.
func (w *wait) heard(ctx context.Context, g driver.Grant, err error) {
	switch {
	case err == nil && g.Guarded:
		w.guard = &g
	case err == nil:
		w.guard = nil
	case ctx.Err() != nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Cut short: the attempt says nothing about the backend. (A
		// context derived from ctx may end first, at the same deadline.)
	default:
		w.guard = nil
	}
}

// noteErr remembers err as the wait's last error, unless it only says that
// ctx ended and an earlier error says more (a refused connection, say).
func (w *wait) noteErr(ctx context.Context, err error) {
	if w.lastErr != nil && ctx.Err() != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	w.lastErr = err
}

// stop frees the wait's watch and timer.
func (w *wait) stop() {
	if w.watch != nil {
		w.watch.Close()
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}
