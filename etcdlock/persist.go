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
// new leader, which is elected within a few election timeouts. A call
// that renews a lease, or takes a lock for a waiter that was just woken,
// must not spend what is left of the lease on that one request. So each
// call sends its requests in tries: a try that gets no answer within its
// share of the time left, or that meets a member without a leader, is
// abandoned and sent again, to whichever member the client picks.
// Every call of the backend may be repeated, so a try abandoned after it
// was applied is harmless.

// minTry is the least time a try is given: less than a round trip on a
// loaded cluster, and every try would be abandoned.
const minTry = 300 * time.Millisecond

// retryPause separates tries, so that a member that has no leader yet is
// not asked again at once.
const retryPause = 50 * time.Millisecond

// persist runs try until it succeeds, fails for good, or ctx ends. Each
// run gets half of the time ctx has left (at least minTry), and asks the
// member to fail at once if it has no leader.
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
