package zklock

import (
	"context"
	"errors"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend with ZooKeeper watches. A fair waiter
// (owner not empty) watches only the node just ahead of its own, so a
// release wakes only the next in line. Other waiters watch the holder's
// node, or the key's children while readers or permits hold it; a change
// of the children that only added nodes (new waiters, new holders) wakes
// no one, since it lets no one in.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	w := &watch{b: b, parent: b.linePath(key), c: make(chan struct{}, 1), stop: make(chan struct{}), rearm: make(chan struct{}, 1)}
	w.lk.Key = key
	if owner != "" {
		w.bind(owner)
		if n, ok := b.entry(driver.LeaseID{Key: key, Owner: owner}); ok && n.path != "" {
			w.name = path.Base(n.path) // a re-entrant lease's node is not named by its owner
		}
	}
	var (
		a   armed
		err error
	)
	if owner == "" && b.takePlainRefusal(key) {
		// A plain Lock's, opened after its first attempt was refused: its
		// next attempt, made at once, binds the watch to its owner and
		// makes the owner's place, and the watch is then set on the node
		// ahead of that place (see placed). Watching the holder until
		// then would cost a request, and a chase of every holder that
		// leaves meanwhile. If no attempt places it within lineFresh,
		// the watch is set as usual.
		a.unset = true
	} else if a, err = run(ctx, func() (armed, error) { return w.arm(time.Now().Add(-lineFresh), armed{}) }); err != nil {
		return nil, err
	}
	// A release made before Watch returns is the caller's attempt's to
	// see, made at once after it (see driver.Backend.Watch): waking the
	// waiter for it would only make another attempt.
	a.now = false
	if owner == "" {
		// A plain waiter: its owner is learned at its next attempt (see
		// bindPlain), which then keeps a place in line.
		b.mu.Lock()
		b.plain[key] = append(b.plain[key], w)
		b.mu.Unlock()
		w.plain = true
	}
	go w.loop(a)
	return w, nil
}

// bind makes w the watch of owner's place in line. A plain waiter's
// watch, bound before its owner's node is made, watches the node ahead of
// it once an attempt has listed the line with it (see placed).
func (w *watch) bind(owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lk.Owner, w.hash = owner, ownerHash(owner)
	w.unplaced = w.plain || w.unplaced
}

// placed tells the plain waiter's watch of the owner, bound before the
// owner's node was made, that an attempt listed the line with that node
// in it: the watch moves to the node ahead of it, from that listing.
func (b *Backend) placed(lk driver.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.plain[lk.Key] {
		w.mu.Lock()
		move := w.lk.Owner == lk.Owner && w.unplaced
		w.unplaced = w.unplaced && !move
		w.mu.Unlock()
		if move {
			select {
			case w.rearm <- struct{}{}:
			default:
			}
		}
	}
}

// owner returns the owner w watches for, or "".
func (w *watch) owner() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lk.Owner
}

type watch struct {
	b      *Backend
	parent string
	plain  bool // a plain mutex waiter's (see bindPlain)
	c      chan struct{}
	stop   chan struct{}
	rearm  chan struct{} // the owner was bound: watch the node ahead of its place
	once   sync.Once

	mu       sync.Mutex
	lk       driver.LeaseID // the key, and the waiter's owner or ""
	hash     string         // the waiter's owner hash, or ""
	name     string         // the waiter's node, if known
	unplaced bool           // a plain waiter's, bound to an owner whose node no listing has shown it yet
}

// armed is one ZooKeeper watch in place; now says the key may be free
// already. A watch of the whole line (children) keeps the line it was set
// on, and its child version (which counts creations and deletions).
type armed struct {
	events   <-chan zk.Event
	now      bool
	sole     string // the waiter's node, when the watched node is the only one ahead of it
	target   string // the watched node, if one node is watched
	first    bool   // the waiter's node is first: nothing is watched (see loop)
	unset    bool   // a plain waiter's, not set until its place is made (see Watch)
	children bool
	names    []string
	cversion int32
}

// onlyAdded reports whether the line went from a to next by creations
// alone: no node left, so no one was let in.
func onlyAdded(a, next armed) bool {
	if !a.children || !next.children || int(next.cversion-a.cversion) != len(next.names)-len(a.names) {
		return false
	}
	for _, n := range a.names {
		if !slices.Contains(next.names, n) {
			return false
		}
	}
	return true
}

// handOverGrace is how long a watch that told its waiter it is first
// waits for the waiter's Lock to close it before it watches again.
const handOverGrace = 200 * time.Millisecond

// lineRead, when set (by tests), runs in arm between reading the line and
// setting the watch: the moment a node can leave unseen.
var lineRead atomic.Pointer[func()]

// lineFresh is how long after an attempt listed a key's line a watch
// opened or moved for a waiter of that key sets itself from that listing.
const lineFresh = time.Second

// arm sets the watch that the next release the waiter cares about fires.
// It starts from a listing of the line that an attempt of this client
// began after since, if there is one, else it lists the line. Any listing
// serves: nodes behind a node only join the line, and nodes ahead of it
// only leave, so a node still there when its watch is set is still the
// one ahead (and a holder still the first); one gone by then is seen
// gone (see armFrom). A watch still set on the target, prev's, serves
// again.
func (w *watch) arm(since time.Time, prev armed) (armed, error) {
	conn := w.b.conn
	if w.owner() != "" {
		// Until this listing sets a watch on the node ahead (see
		// markWatched), the waiter's attempts list the line themselves.
		w.b.unwatch(driver.LeaseID{Key: w.lk.Key, Owner: w.owner()})
	}
	ls, ok := w.b.takeLine(w.lk.Key, since)
	if !ok {
		ls.at = time.Now()
		names, st, err := conn.Children(w.parent)
		if errors.Is(err, zk.ErrNoNode) { // never locked: free
			_, _, events, err := conn.ExistsW(w.parent)
			return armed{events: events, now: true}, err
		}
		if err != nil {
			return armed{}, err
		}
		ls.names, ls.cversion = names, st.Cversion
	}
	if f := lineRead.Load(); f != nil {
		(*f)()
	}
	return w.armFrom(ls, prev, stepsPast)
}

// stepsPast bounds how many nodes, found gone as their watch was set,
// armFrom steps past in one listing.
const stepsPast = 3

// armFrom sets the watch from the listing ls. A node found gone as its
// watch is set is dropped from the listing, and the watch set again from
// the rest, at most steps times: the node before it, still there, is
// then the one ahead (or the holder, the line's first).
func (w *watch) armFrom(ls listing, prev armed, steps int) (armed, error) {
	conn := w.b.conn
	w.mu.Lock()
	hash, name := w.hash, w.name
	w.mu.Unlock()
	names, start := ls.names, ls.at
	// anyChange watches the whole line; the key may be free already if
	// a node left since it was read.
	anyChange := func(free bool) (armed, error) {
		again, st2, events, err := conn.ChildrenW(w.parent)
		if err != nil {
			return armed{}, err
		}
		a := armed{events: events, children: true, names: again, cversion: st2.Cversion}
		a.now = free || !onlyAdded(armed{children: true, names: names, cversion: ls.cversion}, a)
		return a, nil
	}
	kids := line(names)
	var target child
	i := -1
	switch {
	case name != "":
		i = slices.IndexFunc(kids, func(c child) bool { return c.name == name })
	case hash != "":
		i = find(kids, hash)
	}
	if i == 0 && (kids[0].kind == driver.Exclusive || kids[0].kind == driver.Write) && !kids[0].reentrant {
		// First: the waiter takes the lock at its next attempt.
		w.b.markFirst(driver.LeaseID{Key: w.lk.Key, Owner: w.owner()}, kids[0].name)
		return armed{now: true, first: true}, nil
	}
	switch {
	case len(kids) == 0 || i == 0:
		return anyChange(true)
	case i > 0 && kids[i].kind == driver.Permit:
		return anyChange(false) // any holder may free a permit
	case i > 0:
		bs := blockers(kids, i, 0)
		if len(bs) == 0 {
			return anyChange(true)
		}
		target = bs[len(bs)-1]
	case kids[0].kind == driver.Exclusive || kids[0].kind == driver.Write:
		target = kids[0]
	default: // readers or permits hold it: any leaving may let a waiter in
		return anyChange(false)
	}
	ok, events := true, prev.events
	if prev.target != target.name || events == nil || len(events) > 0 {
		var err error
		if ok, _, events, err = conn.ExistsW(w.parent + "/" + target.name); err != nil {
			return armed{}, err
		}
	}
	var sole string
	if i == 1 && (kids[1].kind == driver.Exclusive || kids[1].kind == driver.Write) && !kids[1].reentrant {
		// The listing has the waiter's node, and so every node made
		// before it: when the one ahead leaves, the waiter is first.
		sole = kids[1].name
	}
	if !ok {
		// Gone since the line was read. ExistsW has then set a watch for
		// the node's creation, which never comes (sequence numbers are not
		// reused): watch the node before it, or the line, or nothing
		// later would fire.
		if steps > 0 {
			ls.names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == target.name })
			return w.armFrom(ls, armed{}, steps-1)
		}
		return anyChange(true)
	}
	if i > 0 && (kids[i].kind == driver.Exclusive || kids[i].kind == driver.Write) && !kids[i].reentrant {
		w.b.markWatched(driver.LeaseID{Key: w.lk.Key, Owner: w.owner()}, kids[i].name, start)
	}
	return armed{events: events, sole: sole, target: target.name}, nil
}

func (w *watch) loop(a armed) {
	fired := false
	for {
		// A watch set just after a wake-up may find the key free: that
		// is the state the wake-up already reported.
		if a.now && !fired {
			w.fire()
		}
		fired = false
		var ev zk.Event
		events := a.events
		if a.first {
			// The waiter's attempt takes the lock without a round trip,
			// and its Lock then closes the watch: look at the line again
			// only if the watch is still wanted a while later.
			events = nil
		}
		since, still := time.Now().Add(-lineFresh), armed{}
		select {
		case ev = <-events:
			since = time.Now()
		case <-afterIf(a.first, handOverGrace):
			ev.Type = zk.EventNodeDataChanged // no news: only look again
			since = time.Now()
		case <-afterIf(a.unset, lineFresh):
			ev.Type = zk.EventNodeDataChanged // no place made: watch as usual
		case <-w.rearm: // an attempt has just listed the line
			ev.Type = zk.EventNodeDataChanged
			still = a
		case <-w.stop:
			return
		case <-w.b.closed:
			return
		}
		deleted := ev.Type == zk.EventNodeDeleted && !a.children
		if deleted && a.sole != "" {
			w.b.markFirst(driver.LeaseID{Key: w.lk.Key, Owner: w.owner()}, a.sole)
			w.fire()
			a, fired = armed{first: true}, true
			continue
		}
		// A node ahead renewing its lease or place lets no one in, and
		// a change of the line may have only added nodes: the new watch
		// tells. The waiter's predecessor leaving lets it in if no node
		// is left ahead: the listing tells, and marks it first (see
		// arm), before it is woken. Anything else may let the waiter in.
		sift := ev.Type == zk.EventNodeChildrenChanged && a.children
		listFirst := deleted && w.owner() != ""
		if ev.Type != zk.EventNodeDataChanged && !sift && !listFirst {
			w.fire()
			fired = true
		}
		prev := a
		for {
			var err error
			if a, err = w.arm(since, still); err == nil {
				break
			}
			w.fire() // the waiter's next attempt reports the error
			fired = true
			since, still = time.Now(), armed{}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-w.stop:
				return
			case <-w.b.closed:
				return
			}
		}
		if sift && !fired && !onlyAdded(prev, a) {
			w.fire()
			fired = true
		}
	}
}

// afterIf is time.After(d) if cond, else a channel that never receives.
func afterIf(cond bool, d time.Duration) <-chan time.Time {
	if !cond {
		return nil
	}
	return time.After(d)
}

func (w *watch) fire() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (w *watch) C() <-chan struct{} { return w.c }

// Close ends the watch. A plain waiter's closes when its Lock returns: if
// the owner did not get the lock, its place in line is removed then.
func (w *watch) Close() error {
	w.once.Do(func() {
		close(w.stop)
		if w.plain {
			w.b.leavePlain(w)
		}
	})
	return nil
}

// leavePlain forgets the plain waiter's watch w and, if its owner waits
// in line without the lock, removes the owner's place: the Lock returned
// without it. The owner's stripe orders this after an attempt still under
// way, whose place it then removes too.
func (b *Backend) leavePlain(w *watch) {
	b.mu.Lock()
	b.plain[w.lk.Key] = slices.DeleteFunc(b.plain[w.lk.Key], func(x *watch) bool { return x == w })
	if len(b.plain[w.lk.Key]) == 0 {
		delete(b.plain, w.lk.Key)
	}
	b.mu.Unlock()
	owner := w.owner()
	if owner == "" {
		return
	}
	lk := driver.LeaseID{Key: w.lk.Key, Owner: owner}
	ctx, cancel := context.WithTimeout(context.Background(), b.sessionTimeout())
	defer cancel()
	_, _ = run(ctx, serial(b, owner, func() (struct{}, error) {
		n, err := b.locate(lk, w.parent)
		if err != nil || n == nil || n.data.Held {
			return struct{}{}, err
		}
		if err := b.conn.Delete(n.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return struct{}{}, err
		}
		b.forget(lk)
		return struct{}{}, nil
	}))
}
