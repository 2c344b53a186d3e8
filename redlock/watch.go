package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// subscribeTimeout bounds a node's subscription when it is still being
// confirmed after Watch has returned.
const subscribeTimeout = 2 * time.Second

// subscribeGrace is how long Watch waits for the other nodes once one has
// confirmed its subscription: one live subscription is enough to hear a
// release, and the late ones join the watch when they are confirmed.
const subscribeGrace = 50 * time.Millisecond

// Watch implements driver.Backend. It subscribes to the key's release channel
// on every master, over each node's shared pub/sub connection, and fires
// when any of them fires: a release publishes on every node it reaches, so
// one live subscription is enough to hear it. The messages name the
// released lease's token, and the watch fires once per release, not once
// per node that reports it: each wake-up is one attempt, and the attempts
// of every waiter at once are what splits the vote. The one exception is
// the key's gate node (see gate), whose report always wakes: a waiter woken
// by another node's report asks the gate first, and may find the released
// lease still there, because the releases run on every node at once. The
// gate's own report comes after the lease is gone from it, so the waiter
// that was refused too early tries again then, instead of at the end of
// the lease. The quiet release of an attempt short of a quorum wakes
// nobody.
//
// Watch returns once every node has confirmed or failed, or subscribeGrace
// after the first confirmation: a slow node does not delay the waiter, and
// its subscription joins the watch when it is confirmed. It fails only if
// no node could subscribe.
func (b *Backend) Watch(ctx context.Context, key, _ string) (driver.Watch, error) {
	if err := b.checkKey(ctx, key); err != nil {
		return nil, err
	}
	ch := b.keys.Get(key).Channel
	w := &watch{c: make(chan struct{}, 1), stop: make(chan struct{}), ws: b.watchersOf(key), gate: b.gateNode(key)}
	w.unwatch = func() { b.unwatch(w.ws) }
	// Subscriptions outlive this call (see above), so their context is
	// detached from ctx, ended by Close, and bounded.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeTimeout)
	w.cancel = cancel
	type result struct {
		node int
		err  error
	}
	results := make(chan result, len(b.nodes))
	for i := range b.nodes {
		go func() {
			sub, err := b.nodes[i].notify.WatchMessages(sctx, ch)
			results <- result{i, err}
			if err == nil {
				w.forward(sub, i)
			}
		}()
	}

	rs := make([]reply, len(b.nodes))
	waiting := b.all
	subscribed := 0
	var grace <-chan time.Time
	for waiting != 0 {
		select {
		case r := <-results:
			waiting &^= 1 << r.node
			rs[r.node] = reply{node: r.node, ok: r.err == nil, err: r.err}
			if r.err == nil {
				subscribed++
				if grace == nil {
					t := time.NewTimer(subscribeGrace)
					defer t.Stop()
					grace = t.C
				}
			}
			continue
		case <-grace:
		case <-ctx.Done():
		}
		break
	}
	if subscribed == 0 {
		w.Close()
		if ctx.Err() != nil {
			b.mark(rs, waiting, 0, ctx.Err())
		} else {
			b.mark(rs, waiting, 0, ErrNodeTimeout)
		}
		return nil, b.quorumError("watch", key, rs)
	}
	if waiting == 0 {
		cancel() // every node has answered: nothing left to bound
	}
	return w, nil
}

var _ driver.MarkWatcher = (*Backend)(nil)

// WatchMark implements driver.MarkWatcher: a mark of what every node's
// subscription to key's channel has heard, or 0 when any of them is not
// live (a release there could go unheard).
func (b *Backend) WatchMark(key string) uint64 {
	if b.usable() != nil || driver.ValidateKey(key) != nil {
		return 0
	}
	ch := b.keys.Get(key).Channel
	var mark uint64
	for i := range b.nodes {
		m := b.nodes[i].notify.Mark(ch)
		if m == 0 {
			return 0
		}
		// Marks only grow, and a node's never repeats: the sum moves
		// whenever one of them does.
		mark += m
	}
	return mark
}

// WatchSince implements driver.MarkWatcher: [Backend.Watch], and whether
// a release may have gone unheard since mark was taken: mark is 0, or a
// node's subscription has heard something since (or is not live now). A
// release names no other client but on the gate node, where a refusal
// enlisted this one (see gate): a wake-up there that names another client
// leaves it enlisted, and moves no mark of its.
func (b *Backend) WatchSince(ctx context.Context, key, owner string, mark uint64) (driver.Watch, bool, error) {
	w, err := b.Watch(ctx, key, owner)
	if err != nil {
		return nil, true, err
	}
	return w, mark == 0 || b.WatchMark(key) != mark, nil
}

// watch merges the release notifications of every node.
type watch struct {
	c      chan struct{}
	stop   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	heard  [4]string // the latest releases fired for, by token
	next   int       // heard's oldest slot
	gate   int       // the key's gate node, whose reports always fire

	ws      *watchers // the backend's record of the key's waiters
	unwatch func()
}

// news reports whether msg, reported by node, should wake the waiter: a
// release the watch has not fired for yet, or any report of the gate node.
// An empty message (a reconnect, or a release that names no token) always
// wakes.
func (w *watch) news(msg string, node int) bool {
	if msg == "" {
		w.ws.heardRelease()
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := false
	for _, h := range w.heard {
		if h == msg {
			seen = true
			break
		}
	}
	if seen && node != w.gate {
		return false
	}
	if !seen {
		w.heard[w.next] = msg
		w.next = (w.next + 1) % len(w.heard)
	}
	w.ws.heardRelease()
	return true
}

// forward passes the notifications of node's subscription sub on until the
// watch closes, then closes sub. It runs on the goroutine that subscribed.
func (w *watch) forward(sub *redisnode.Watch, node int) {
	defer sub.Close()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	defer w.wg.Done()
	for {
		select {
		case msg := <-sub.Messages():
			if !w.news(msg, node) {
				continue
			}
			select {
			case w.c <- struct{}{}:
			default: // a wake-up is already pending
			}
		case <-w.stop:
			return
		}
	}
}

func (w *watch) C() <-chan struct{} { return w.c }

// Close ends every node's subscription, including those still being
// confirmed, and returns once they are dropped.
func (w *watch) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.stop)
		w.cancel()
		w.wg.Wait()
		w.unwatch()
	})
	return nil
}
