package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend. With an owner that waits in line (a
// fair waiter), it watches only the key just before the owner's place
// (its key, or the anchor of its re-entrant identity, as this backend's
// attempt recorded), and fires when the owner's turn may have come.
// Otherwise it fires on every deletion of a holding or waiter of key.
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
//
// The waiter next in line (one key ahead of its own) watches the whole
// line instead, to see in one stream both the deletion of the key ahead
// and any deletion of its own: when the key ahead goes and its own is
// still there, its key holds the lock from that revision on, since keys
// put later are behind it. The watch records that turn, and the owner's
// next Acquire is granted from it without a request: a handoff costs the
// release's round trip and the event's way to the waiter.
//
// Every watch starts at the cluster's current revision, and what it
// watches is read again at the revision it started from: a watch asked to
// start at an earlier revision is served by etcd's background catch-up,
// which runs every 100ms, and would see the release that late.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := checkKey("watch", key); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.ctx))
	w := &watch{b: b, k: b.keys(key, owner, driver.Exclusive, 0), owner: owner, c: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	s, err := w.open(ctx, wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcdlock: watch %q: %w", key, err)
	}
	started := b.goTracked(func() {
		defer close(w.done)
		w.run(wctx, s)
	})
	if !started {
		cancel()
		return nil, errClosed
	}
	return w, nil
}

type watch struct {
	b     *Backend
	k     keys
	owner string
	// pending, in open, is the view read for the next subscription.
	pending view
	c       chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
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

// maxAhead is how many keys ahead of its own a waiter may have and still
// watch the whole line; one further back watches the key just ahead of
// it. A release sends its deletion to at most maxAhead waiters, whatever
// the length of the line.
const maxAhead = 16

// view is the owner's place in line at a revision.
type view struct {
	rev   int64
	place string   // the owner's place; "" if it has none
	mine  int64    // the place's create revision
	ahead []string // the keys ahead of it, nearest first, up to maxAhead
	far   bool     // more than maxAhead keys are ahead of it
}

// watched names what a view asks to watch: deletions of key, of the
// whole line if line.
func (v view) watched(k keys) (key string, line bool) {
	if v.far {
		return v.ahead[0], false
	}
	return k.lock, true
}

// sub is one subscription of the watch: etcd's watch of what a view asks
// for, from the revision the view was read at.
type sub struct {
	v      view
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

// read reads the owner's place in line at revision rev (0: the current
// one). For a re-entrant identity waiting in line, the place is the
// identity's anchor.
func (w *watch) read(ctx context.Context, rev int64) (view, error) {
	k, _ := w.b.named(w.k, driver.Exclusive, w.owner) // renamed if its place was dropped and put again
	place, mine := k.own, w.b.revision(k.own)
	if anchor, arev := w.b.holdAnchor(w.k.hold); anchor != "" {
		place, mine = anchor, arev
	}
	if mine == 0 {
		resp, err := w.b.cli.Get(ctx, place, clientv3.WithRev(rev), clientv3.WithKeysOnly())
		if err != nil {
			return view{}, err
		}
		if len(resp.Kvs) == 0 {
			return view{rev: resp.Header.Revision}, nil
		}
		mine, rev = resp.Kvs[0].CreateRevision, resp.Header.Revision
	}
	// The place and the keys before it, up to one more than maxAhead.
	resp, err := w.b.cli.Get(ctx, w.k.lock, clientv3.WithRev(rev), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(maxAhead+2), clientv3.WithKeysOnly())
	if err != nil {
		return view{}, err
	}
	v := view{rev: resp.Header.Revision}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Key) != place || resp.Kvs[0].CreateRevision != mine {
		return v, nil // not in line (any more)
	}
	v.place, v.mine = place, mine
	for _, kv := range resp.Kvs[1:] {
		v.ahead = append(v.ahead, string(kv.Key))
	}
	if len(v.ahead) > maxAhead {
		v.ahead, v.far = v.ahead[:1], true
	}
	return v, nil
}

// maxSubs bounds the watches open starts to find one that the line,
// read where it starts, still asks for.
const maxSubs = 4

// open subscribes to what the owner's place asks to watch, and returns
// once etcd has started the watch, so that a release after open returns
// is seen. Most waiters watch the whole line: open starts that watch
// first, then reads the owner's place; a waiter far back watches the key ahead of it instead.
func (w *watch) open(ctx, wctx context.Context) (*sub, error) {
	ctx, cancel := context.WithTimeout(ctx, w.b.callTimeout)
	defer cancel()
	key, line, from := w.k.lock, true, int64(0)
	for subs := 1; ; subs++ {
		s, err := w.subscribe(ctx, wctx, key, line, from)
		if err != nil || w.owner == "" {
			return s, err
		}
		if from != 0 {
			return w.subscribed(s), nil // s.v was read at from-1
		}
		// A linearizable read is at or after the revision the watch
		// started from, which a member had applied: the watch sees every
		// deletion after the read, and those it sees before are in it.
		v, err := w.read(ctx, 0)
		if err != nil {
			s.cancel()
			return nil, err
		}
		if k, l := v.watched(w.k); k == key && l == line {
			s.v = v
			return w.subscribed(s), nil
		}
		s.cancel()
		key, line = v.watched(w.k)
		if subs+1 == maxSubs {
			// The line keeps changing: start at the revision read,
			// however late etcd's catch-up delivers it.
			from = v.rev + 1
		}
		w.pending = v
	}
}

// subscribe starts etcd's watch of the deletions of key (of the keys
// under it, if prefix), from revision from (0: the current one), and
// returns it once etcd confirms it.
func (w *watch) subscribe(ctx, wctx context.Context, key string, prefix bool, from int64) (*sub, error) {
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	if from != 0 {
		opts = append(opts, clientv3.WithRev(from))
	}
	sctx, cancel := context.WithCancel(wctx)
	s := &sub{cancel: cancel}
	if from != 0 {
		s.v = w.pending
	}
	// The client's Watch waits for a stream to a member, as long as the
	// watch lasts: the call's bound cancels it.
	started := make(chan clientv3.WatchChan, 1)
	go func() { started <- w.b.cli.Watch(sctx, key, opts...) }()
	select {
	case s.ch = <-started:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	select {
	case created := <-s.ch:
		err := created.Err()
		if err == nil && !created.Created {
			err = fmt.Errorf("watch of %q not started", key)
		}
		if err != nil {
			cancel()
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

// subscribed notes what the view shows of the owner's place: its turn,
// or keys ahead of it.
func (w *watch) subscribed(s *sub) *sub {
	switch {
	case s.v.place == "":
	case len(s.v.ahead) == 0:
		w.b.sawTurn(s.v.place, s.v.mine)
	default:
		w.b.sawBehind(s.v.place, s.v.mine)
	}
	return s
}

// run fires on what the subscription sees, and subscribes again when
// the owner's place moves, until the watch is closed. After an error it
// fires (the caller then tries again) and subscribes again.
func (w *watch) run(ctx context.Context, s *sub) {
	for {
		if s.v.place != "" && len(s.v.ahead) == 0 {
			w.fire() // its turn: the caller tries now
		}
		err := w.await(s)
		s.cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.fire()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		for {
			s, err = w.open(ctx, ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.fire()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// await follows s until the owner's place moves (nil), or the watch
// fails. A watch of the line without a place fires on every deletion; the
// next in line notes its turn when the key ahead goes, and its own key
// stays.
func (w *watch) await(s *sub) error {
	for resp := range s.ch {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) == 0 {
			continue
		}
		if s.v.place == "" {
			w.fire()
			continue
		}
		if _, line := s.v.watched(w.k); !line {
			return nil // the key ahead went: read the line again
		}
		waiting, gone := len(s.v.ahead) > 0, false
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if key == s.v.place {
				gone = true
			} else if i := slices.Index(s.v.ahead, key); i >= 0 {
				s.v.ahead = slices.Delete(s.v.ahead, i, i+1)
			}
		}
		switch {
		case gone:
			w.b.lostTurn(s.v.place, s.v.mine)
			w.fire()
			return nil
		case waiting && len(s.v.ahead) == 0:
			w.b.sawTurn(s.v.place, s.v.mine)
			w.fire()
		}
	}
	return fmt.Errorf("etcdlock: watch of %q ended", w.k.lock)
}
