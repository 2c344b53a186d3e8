package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A request that reached a member just before its leader died waits for
// an answer that does not come: etcd neither fails it nor moves it to the
// new leader, which is elected within a few election timeouts. A renewal
// (a Refresh, a keep-alive), or an attempt of a waiter that was just
// woken, must not spend what is left of the lease on that one request.
// Every request is marked to fail at once on a member that knows it has
// no leader, and:
//
//   - a renewal's request, which changes nothing that a repeat would not,
//     is hedged (see hedge): while no answer came, the same request is
//     sent again each time half of the time left has passed, without
//     abandoning the ones in flight, so a slow answer still counts;
//   - an Acquire, whose steps update the backend's records of the key,
//     is tried again in turn (see persist), each try given half of the
//     time left and at least a second.
//
// Each request goes to whichever member the client picks. Every call of
// the backend may be repeated, so a request applied after its call gave
// up on it is harmless.

// minWait is the least time before a hedged request is sent again: less
// than a round trip on a loaded cluster would double every request.
const minWait = 300 * time.Millisecond

// minTry is the least time a try of persist is given.
const minTry = time.Second

// retryPause separates requests after all in flight failed at once (no
// leader): the member is not asked again at once.
const retryPause = 50 * time.Millisecond

// maxHedged bounds the requests hedge sends for one call.
const maxHedged = 8

// hedge sends try and returns its first answer that is not unanswered;
// while none came, it sends try again each time half of the time ctx has
// left (at least minWait) has passed, and after all requests in flight
// failed unanswered. When ctx ends first, it returns the last error
// seen, or ctx's. try must change nothing a repeat would not, and may run
// concurrently with itself.
func hedge[T any](ctx context.Context, try func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	answers := make(chan answer, maxHedged)
	running, sent := 0, 0
	send := func() {
		running++
		sent++
		go func() {
			v, err := try(clientv3.WithRequireLeader(ctx))
			answers <- answer{v, err}
		}()
	}
	send()
	var last answer
	for {
		wait := retryPause
		if running > 0 {
			wait = minWait
			if dl, ok := ctx.Deadline(); ok {
				wait = max(time.Until(dl)/2, minWait)
			}
		}
		t := time.NewTimer(wait)
		if sent == maxHedged {
			t.Stop()
		}
		select {
		case a := <-answers:
			t.Stop()
			running--
			if a.err == nil || !unanswered(a.err) {
				return a.v, a.err
			}
			last = a
			if running == 0 && sent == maxHedged {
				return a.v, a.err
			}
		case <-t.C:
			send()
		case <-ctx.Done():
			t.Stop()
			if last.err == nil {
				last.err = ctx.Err()
			}
			return last.v, last.err
		}
	}
}

// persist runs try until it succeeds, fails for good, or ctx ends, one
// try at a time. Each try gets half of the time ctx has left (at least
// minTry), and asks the member to fail at once if it has no leader.
func persist(ctx context.Context, try func(ctx context.Context) error) error {
	for {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			tctx, cancel = context.WithTimeout(ctx, max(time.Until(dl)/2, minTry))
		}
		err := try(clientv3.WithRequireLeader(tctx))
		cancel()
		if err == nil || ctx.Err() != nil || !unanswered(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retryPause):
		}
	}
}

// unanswered reports whether err says only that a request got no answer
// in time, or met a cluster without a leader: its outcome is unknown, and
// sending it again may find the new leader. Other errors, a connection
// that broke among them, come back at once: the caller (package distlock)
// decides whether to try again.
func unanswered(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, rpctypes.ErrNoLeader),
		errors.Is(err, rpctypes.ErrLeaderChanged),
		errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return true
	}
	return false
}
