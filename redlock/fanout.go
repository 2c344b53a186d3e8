package redlock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reply is one node's answer within a fan-out.
type reply struct {
	node  int
	ok    bool          // granted, extended, released, confirmed or subscribed
	token uint64        // acquire: the node's fencing token; seed: its counter
	ttl   time.Duration // acquire: the holder's remaining lease when refused
	err   error         // no usable answer
}

// op runs one request on one node.
type op func(ctx context.Context, node int, rdb redis.UniversalClient) reply

// fanout sends one request to many nodes at once, one goroutine each, and
// hands the replies to the caller as they come. The caller stops reading
// as soon as the outcome is decided: later replies land in the buffered
// channel and are dropped with it, so a slow node never holds the caller.
//
// The requests share one context, bounded by the per-node timeout. It is
// cancelled by whichever finishes last, the caller or the slowest request,
// so that a caller that has decided does not cut short requests that must
// still reach their node (a release, a seed).
type fanout struct {
	ctx     context.Context
	parent  context.Context
	cancel  context.CancelFunc
	out     chan reply
	refs    atomic.Int32
	expired bool // next found the timeout passed; read by the caller only
}

// fan starts op on every node whose bit is set in nodes.
func (b *Backend) fan(parent context.Context, timeout time.Duration, nodes uint64, f op) *fanout {
	ctx, cancel := context.WithTimeout(parent, timeout)
	fo := &fanout{ctx: ctx, parent: parent, cancel: cancel, out: make(chan reply, len(b.nodes))}
	fo.refs.Store(1)
	for i := range b.nodes {
		if nodes&(1<<i) != 0 {
			fo.refs.Add(1)
			go fo.run(f, i, &b.nodes[i])
		}
	}
	return fo
}

func (fo *fanout) run(f op, i int, n *node) {
	r := f(fo.ctx, i, n.rdb)
	if r.err != nil && r.err != errPending {
		n.lastErr.Store(&r.err)
	}
	fo.out <- r
	fo.done()
}

// done drops one reference; the last one cancels the shared context.
func (fo *fanout) done() {
	if fo.refs.Add(-1) == 0 {
		fo.cancel()
	}
}

// next returns the next reply, or false once the timeout has passed (or the
// caller's context ended) with no reply waiting.
func (fo *fanout) next() (reply, bool) {
	select {
	case r := <-fo.out:
		return r, true
	case <-fo.ctx.Done():
		// A reply and the deadline may be ready together: replies first.
		select {
		case r := <-fo.out:
			return r, true
		default:
			fo.expired = true
			return reply{}, false
		}
	}
}

// silence is the error recorded for a node whose reply the caller did not
// wait for: it was too slow, or the outcome was decided without it.
func (fo *fanout) silence() error {
	if !fo.expired {
		return errNotWaited
	}
	if err := fo.parent.Err(); err != nil {
		return err
	}
	return ErrNodeTimeout
}
