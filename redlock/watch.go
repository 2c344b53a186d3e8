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

// Watch implements driver.Backend. It subscribes to the key's release channel
// on every master, over each node's shared pub/sub connection, and fires
// when any of them fires: a release publishes on every node it reaches, so
// one live subscription is enough to hear it.
//
// Watch returns once every node has confirmed or failed, or a node timeout
// after the first confirmation: a slow node does not delay the waiter, and
// its subscription joins the watch when it is confirmed. It fails only if
// no node could subscribe.
func (b *Backend) Watch(ctx context.Context, key, _ string) (driver.Watch, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	ch := b.keys.Get(key).Channel
	w := &watch{c: make(chan struct{}, 1), stop: make(chan struct{})}
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
			sub, err := b.nodes[i].notify.Watch(sctx, ch)
			results <- result{i, err}
			if err == nil {
				w.forward(sub)
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
					t := time.NewTimer(b.releaseTimeout())
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

// watch merges the release notifications of every node.
type watch struct {
	c      chan struct{}
	stop   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// forward passes sub's notifications on until the watch closes, then
// closes sub. It runs on the goroutine that subscribed.
func (w *watch) forward(sub *redisnode.Watch) {
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
		case <-sub.C():
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
	})
	return nil
}
