package etcdlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend. With an owner that waits in line (a
// fair waiter), it watches only the key just before the owner's place
// (its key, or the anchor of its re-entrant identity, as this backend's
// attempt recorded), and fires when that key is deleted: released, given
// up or expired. Otherwise it
// fires on every deletion of a holding or waiter of key.
//
// Only a waiter with a place in line can watch a single key, as
// concurrency.Mutex's waiters do: a waiter without one has no key to be
// "just after". The contract gives a place only to the waiters that ask
// for one (Request.Queue > 0: a fair waiter, or a writer) and names the
// owner to Watch only for fair waiters. A plain waiter leaves nothing when
// refused, which is what lets a released lock go to whoever asks first;
// it cannot know which deletion frees the lock for its kind (a reader
// waits for writers only, a permit for any holder), so it is woken by
// each, and every plain waiter of the key tries again. That herd is the
// price of unfair locks: distlock.WithFairness queues the waiters and
// wakes one per release.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, fmt.Errorf("etcdlock: watch: empty key: %w", driver.ErrInvalidKey)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.ctx))
	w := &watch{b: b, k: b.keys(key, owner, driver.Exclusive, 0), owner: owner, c: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	first, err := w.target(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcdlock: watch %q: %w", key, err)
	}
	started := b.goTracked(func() {
		defer close(w.done)
		w.run(wctx, first)
	})
	if !started {
		cancel()
		return nil, errClosed
	}
	return w, nil
}

type watch struct {
	b      *Backend
	k      keys
	owner  string
	c      chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// target is what to watch next: deletions of key (a prefix if prefix)
// from revision rev on. now says it is already the owner's turn.
type target struct {
	key    string
	prefix bool
	rev    int64
	now    bool
}

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	return nil
}

func (w *watch) fire() {
	select {
	case w.c <- struct{}{}:
	default: // one pending wake-up is enough
	}
}

// target finds what to watch: the key before the owner's in line, or the
// whole lock when the owner has no place in it. The watch starts just
// after the revision read, so no deletion after this call is missed.
func (w *watch) target(ctx context.Context) (target, error) {
	ctx, cancel := context.WithTimeout(ctx, w.b.callTimeout)
	defer cancel()
	if w.owner != "" {
		// The owner's place: its key, or, for an owner of a re-entrant
		// identity waiting in line, the identity's anchor.
		place := w.k.own
		if anchor, _ := w.b.holdAnchor(w.k.hold); anchor != "" {
			place = anchor
		}
		resp, err := w.b.cli.Get(ctx, place)
		if err != nil {
			return target{}, err
		}
		if len(resp.Kvs) > 0 {
			mine := resp.Kvs[0].CreateRevision
			resp, err := w.b.cli.Get(ctx, w.k.lock, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine-1),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1), clientv3.WithKeysOnly())
			if err != nil {
				return target{}, err
			}
			if len(resp.Kvs) > 0 {
				return target{key: string(resp.Kvs[0].Key), rev: resp.Header.Revision + 1}, nil
			}
			return target{key: w.k.lock, prefix: true, rev: resp.Header.Revision + 1, now: true}, nil
		}
	}
	resp, err := w.b.cli.Get(ctx, w.k.lock, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return target{}, err
	}
	return target{key: w.k.lock, prefix: true, rev: resp.Header.Revision + 1}, nil
}

// run watches t, fires on each deletion, and moves on to the next key
// in line, until the watch is closed. After an error it fires (the
// caller then tries again) and starts over.
func (w *watch) run(ctx context.Context, t target) {
	for {
		if t.now {
			w.fire()
		}
		err := w.await(ctx, t)
		if ctx.Err() != nil {
			return
		}
		w.fire()
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		for {
			t, err = w.target(ctx)
			if err == nil {
				t.now = false // just fired: the waiter's next attempt sees its turn
				break
			}
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// await returns at the first deletion t covers, or the watch's failure.
func (w *watch) await(ctx context.Context, t target) error {
	opts := []clientv3.OpOption{clientv3.WithRev(t.rev), clientv3.WithFilterPut()}
	if t.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range w.b.cli.Watch(wctx, t.key, opts...) {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	return fmt.Errorf("etcdlock: watch of %q ended", t.key)
}
