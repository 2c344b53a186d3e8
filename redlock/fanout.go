package redlock

import (
	"context"
	"math/bits"
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
	kind  error         // acquire: refused for the key's kind (a *driver.KindError)
}

// op runs one request on one node.
type op func(ctx context.Context, node int, rdb redis.UniversalClient) reply

// fanout sends one request to many nodes at once, one goroutine each, and
// hands the replies to the caller as they come. The caller stops reading
// as soon as the outcome is decided; a slow node never holds it.
//
// Each goroutine stores its reply in its node's slot and wakes the caller
// only when the reply may decide something: a failure or refusal, the
// wakeAt-th success, or the last reply. On the common path the caller is
// woken once per fan-out, not once per node.
//
// The requests share one context, bounded by the per-node timeout. It is
// cancelled by whichever finishes last, the caller or the slowest request,
// so that a caller that has decided does not cut short requests that must
// still reach their node (a release, a seed); fanDetached frees them from
// the caller's context too.
type fanout struct {
	ctx    context.Context // the requests'
	parent context.Context // the caller's wait
	cancel context.CancelFunc
	res    []reply       // slot i is written by node i's goroutine before it sets bit i of got
	got    atomic.Uint64 // nodes whose reply is in res
	oks    atomic.Int32  // successful replies so far
	wake   chan struct{} // capacity 1: a pending wake-up
	asked  uint64
	wakeAt int32
	refs   atomic.Int32

	follow  atomic.Pointer[followUp] // set by then
	claimed atomic.Uint64            // nodes whose follow-up has started

	seen    uint64 // replies handed out by next; the caller's only
	expired bool   // next found the timeout passed; the caller's only
}

// fan starts f on every node whose bit is set in nodes, under ctx and
// bounded by timeout (0: by ctx alone). wakeAt is the number of successful
// replies at which the caller wants to look before the last reply (0: at
// every reply).
func (b *Backend) fan(ctx context.Context, timeout time.Duration, nodes uint64, wakeAt int, f op) *fanout {
	return b.start(ctx, ctx, timeout, nodes, wakeAt, f)
}

// fanDetached is fan for requests that must reach every node although the
// caller stops waiting once it has decided, and may end ctx at once (a
// renewal): they run detached from ctx, bounded by timeout alone, and the
// caller waits for their replies only as long as ctx allows.
func (b *Backend) fanDetached(ctx context.Context, timeout time.Duration, nodes uint64, wakeAt int, f op) *fanout {
	return b.start(ctx, context.WithoutCancel(ctx), timeout, nodes, wakeAt, f)
}

// start starts a fan-out whose caller waits under parent and whose
// requests run under base, bounded by timeout.
func (b *Backend) start(parent, base context.Context, timeout time.Duration, nodes uint64, wakeAt int, f op) *fanout {
	ctx, cancel := context.WithCancel(base)
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(base, timeout)
	}
	fo := &fanout{
		ctx: ctx, parent: parent, cancel: cancel,
		res:   make([]reply, len(b.nodes)),
		wake:  make(chan struct{}, 1),
		asked: nodes, wakeAt: int32(max(wakeAt, 1)),
	}
	fo.refs.Store(1)
	for i := range b.nodes {
		if nodes&(1<<i) != 0 {
			fo.refs.Add(1)
			b.nodes[i].dispatch(task{fo: fo, f: f, i: i}, b.stop)
		}
	}
	return fo
}

// task is one node's part of a fan-out.
type task struct {
	fo *fanout
	f  op
	i  int
}

// workerIdle is how long a node's worker waits for a task before it exits.
const workerIdle = 30 * time.Second

// dispatch hands t to an idle worker of n, or starts a new worker if none
// is idle. Workers outlive the call: a fresh goroutine would grow its
// stack to go-redis' depth on every request, which costs more than the
// request's own work. A request that hangs holds only its own worker.
func (n *node) dispatch(t task, stop <-chan struct{}) {
	select {
	case n.tasks <- t:
	default:
		go n.work(t, stop)
	}
}

func (n *node) work(t task, stop <-chan struct{}) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		t.fo.run(t.f, t.i, n)
		t = task{} // let the finished fan-out go
		idle.Reset(workerIdle)
		select {
		case t = <-n.tasks:
		case <-idle.C:
			return
		case <-stop:
			return
		}
	}
}

func (fo *fanout) run(f op, i int, n *node) {
	r := f(fo.ctx, i, n.rdb)
	if r.err != nil && r.err != errPending {
		n.lastErr.Store(&r.err)
	}
	fo.res[i] = r
	bit := uint64(1) << i
	last := fo.got.Or(bit)|bit == fo.asked
	if !r.ok || last || fo.oks.Add(1) == fo.wakeAt {
		select {
		case fo.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	fo.done()
	if fl := fo.follow.Load(); fl != nil && fl.nodes&bit != 0 && fo.claim(bit) {
		fl.f(i)
	}
}

// followUp is what then arranges: f, for each of nodes.
type followUp struct {
	nodes uint64
	f     func(node int)
}

// then arranges for f to run for each node in nodes once that node's
// request has finished (replied, failed or timed out): in a goroutine of
// its own for a node already finished, else in the node's worker right
// after the request. A request to a node goes on a connection of its own,
// so anything sent to that node before then may overtake it; f cannot. At
// most one call per fan-out.
//
// run sets the node's bit of got and then looks for a follow-up; then
// stores the follow-up and then looks at got. Whichever comes second sees
// the other's write, and claim lets only one of them start f.
func (fo *fanout) then(nodes uint64, f func(node int)) {
	fo.follow.Store(&followUp{nodes: nodes, f: f})
	for done := fo.got.Load() & nodes; done != 0; done &= done - 1 {
		bit := done & -done
		if fo.claim(bit) {
			go f(bits.TrailingZeros64(bit))
		}
	}
}

// claim reports whether the caller is the first to claim the follow-up of
// the node with bit.
func (fo *fanout) claim(bit uint64) bool { return fo.claimed.Or(bit)&bit == 0 }

// done drops one reference; the last one cancels the shared context.
func (fo *fanout) done() {
	if fo.refs.Add(-1) == 0 {
		fo.cancel()
	}
}

// next returns the next reply, or false once the timeout has passed (or the
// caller's context ended) with no reply waiting.
func (fo *fanout) next() (reply, bool) {
	for {
		if ready := fo.got.Load() &^ fo.seen; ready != 0 {
			i := bits.TrailingZeros64(ready)
			fo.seen |= 1 << i
			return fo.res[i], true
		}
		select {
		case <-fo.wake:
			continue
		case <-fo.ctx.Done():
		case <-fo.parent.Done(): // a detached fan-out's caller stops here
		}
		if fo.got.Load()&^fo.seen != 0 {
			continue // replies first
		}
		fo.expired = true
		return reply{}, false
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

// collect hands take the replies of the nodes in awaited as they come,
// until take returns false (the outcome is decided), every awaited node has
// replied, or the timeout passes; replies of other nodes (probes) are
// skipped. It then lets the fan-out go and returns the awaited nodes whose
// reply was not taken. Every operation reads its fan-out this way.
func (fo *fanout) collect(awaited uint64, take func(r reply) (more bool)) (silent uint64) {
	for awaited != 0 {
		r, ok := fo.next()
		if !ok {
			break
		}
		bit := uint64(1) << r.node
		if awaited&bit == 0 {
			continue
		}
		awaited &^= bit
		if !take(r) {
			break
		}
	}
	fo.done()
	return awaited
}
