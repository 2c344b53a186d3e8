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
	w := &watch{b: b, parent: b.linePath(key), c: make(chan struct{}, 1), stop: make(chan struct{})}
	if owner != "" {
		w.hash = ownerHash(owner)
		if n, ok := b.entry(lease{key, owner}); ok && n.path != "" {
			w.name = path.Base(n.path) // a re-entrant lease's node is not named by its owner
		}
	}
	a, err := run(ctx, w.arm)
	if err != nil {
		return nil, err
	}
	go w.loop(a)
	return w, nil
}

type watch struct {
	b      *Backend
	parent string
	hash   string // the fair waiter's owner hash, or ""
	name   string // the fair waiter's node, if known
	c      chan struct{}
	stop   chan struct{}
	once   sync.Once
}

// armed is one ZooKeeper watch in place; now says the key may be free
// already. A watch of the whole line (children) keeps the line it was set
// on, and its child version (which counts creations and deletions).
type armed struct {
	events   <-chan zk.Event
	now      bool
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

// lineRead, when set (by tests), runs in arm between reading the line and
// setting the watch: the moment a node can leave unseen.
var lineRead atomic.Pointer[func()]

// arm sets the watch that the next release the waiter cares about fires.
func (w *watch) arm() (armed, error) {
	conn := w.b.conn
	names, st, err := conn.Children(w.parent)
	if errors.Is(err, zk.ErrNoNode) { // never locked: free
		_, _, events, err := conn.ExistsW(w.parent)
		return armed{events: events, now: true}, err
	}
	if err != nil {
		return armed{}, err
	}
	if f := lineRead.Load(); f != nil {
		(*f)()
	}
	// anyChange watches the whole line; the key may be free already if
	// a node left since it was read.
	anyChange := func(free bool) (armed, error) {
		again, st2, events, err := conn.ChildrenW(w.parent)
		if err != nil {
			return armed{}, err
		}
		a := armed{events: events, children: true, names: again, cversion: st2.Cversion}
		a.now = free || !onlyAdded(armed{children: true, names: names, cversion: st.Cversion}, a)
		return a, nil
	}
	kids := line(names)
	var target child
	i := -1
	switch {
	case w.name != "":
		i = slices.IndexFunc(kids, func(c child) bool { return c.name == w.name })
	case w.hash != "":
		i = find(kids, w.hash)
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
	ok, _, events, err := conn.ExistsW(w.parent + "/" + target.name)
	if err != nil {
		return armed{}, err
	}
	if !ok {
		// Gone since the line was read. ExistsW has then set a watch for
		// the node's creation, which never comes (sequence numbers are not
		// reused): watch the line instead, or nothing later would fire.
		return anyChange(true)
	}
	return armed{events: events}, nil
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
		select {
		case ev = <-a.events:
		case <-w.stop:
			return
		case <-w.b.closed:
			return
		}
		// A node ahead renewing its lease or place lets no one in, and
		// a change of the line may have only added nodes: the new watch
		// tells. Anything else may let the waiter in.
		sift := ev.Type == zk.EventNodeChildrenChanged && a.children
		if ev.Type != zk.EventNodeDataChanged && !sift {
			w.fire()
			fired = true
		}
		prev := a
		for {
			var err error
			if a, err = w.arm(); err == nil {
				break
			}
			w.fire() // the waiter's next attempt reports the error
			fired = true
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

func (w *watch) fire() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() { close(w.stop) })
	return nil
}
