package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Waiters without a PostgreSQL listener are woken in two ways. A release
// made in this process wakes at once the watches of the key on every
// backend of the process that uses the same table of the same database
// (the same SQLite file, the same server and database): they share one
// hub, found by the database's identity. A release made by another
// process reaches them through the watch's own poll, which starts at
// minPoll and doubles up to maxPoll; distlock bounds it further by the
// holder's remaining lease. Every Lock call starts its watch afresh, so
// minPoll stays well above a round trip: the waiters of a busy key would
// otherwise spend the database on polls that a direct wake-up makes
// needless.
const (
	minPoll = 16 * time.Millisecond
	maxPoll = 250 * time.Millisecond
)

// localHubs are the hubs of the process, by database identity and table.
var localHubs = struct {
	sync.Mutex
	m map[string]*localHub
}{m: make(map[string]*localHub)}

// localHub dispatches the releases made in this process to the watches
// of keys.
type localHub struct {
	mu      sync.Mutex
	watches watchSet[*localWatch]
	kept    map[string]*keptHere // MySQL: the wake locks of keys held here (gate.go)
}

func hubOf(id string) *localHub {
	localHubs.Lock()
	defer localHubs.Unlock()
	h := localHubs.m[id]
	if h == nil {
		h = &localHub{watches: make(watchSet[*localWatch])}
		localHubs.m[id] = h
	}
	return h
}

// identity names the database b's table lives in, so that the backends of
// one process that share the table share a hub. A wrong answer costs
// promptness only: a watch polls in any case.
func (b *Backend) identity(ctx context.Context) (string, error) {
	var id string
	if err := b.db.QueryRowContext(ctx, b.d.identity).Scan(&id); err != nil {
		return "", err
	}
	if id == "" { // an SQLite database in memory: this *sql.DB's own
		id = fmt.Sprintf("%p", b.db)
	}
	return string(b.dialect) + "|" + id + "|" + b.table, nil
}

// localHub returns b's hub, finding it on first use.
func (b *Backend) localHub(ctx context.Context) (*localHub, error) {
	b.mu.Lock()
	h := b.local
	b.mu.Unlock()
	if h != nil {
		return h, nil
	}
	id, err := b.identity(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllock: naming the database: %w", err)
	}
	h = hubOf(id)
	b.mu.Lock()
	b.local = h
	b.mu.Unlock()
	return h, nil
}

// Whom a release made in this process wakes.
type wakeWho int

const (
	wakeAll    wakeWho = iota // every watch of the key: readers, permits, a Break
	wakeOldest                // the watch that waited longest: a mutex's release, which lets one in
	wakeOwner                 // the fair waiter's whose turn it is
)

// wakeLocal wakes watches of key in this process after b released it:
// all, the oldest, or those of owner (see wakeWho). Waking one waiter for
// a mutex spares the others an attempt bound to fail; if the one woken
// loses the lock to another, that other's release wakes the next.
func (b *Backend) wakeLocal(key string, who wakeWho, owner string) {
	b.mu.Lock()
	h := b.local
	b.mu.Unlock()
	if h == nil {
		return // no watch was ever made through b, and b's hub is unknown
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var oldest *localWatch
	for w := range h.watches[key] {
		switch {
		case who == wakeAll, who == wakeOwner && w.owner == owner:
			w.wake()
		case who == wakeOldest && (oldest == nil || w.seq < oldest.seq):
			oldest = w
		}
	}
	if oldest != nil {
		oldest.wake()
	}
}

// watchSeq numbers the watches of the process in the order they began.
var watchSeq atomic.Uint64

// watchLocal subscribes to the releases of key made in this process, and
// polls the key's row for the others' (see localWatch.tick). owner is a
// fair waiter's, or empty.
func (b *Backend) watchLocal(ctx context.Context, key, owner string) (driver.Watch, error) {
	h, err := b.localHub(ctx)
	if err != nil {
		return nil, err
	}
	w := &localWatch{b: b, h: h, key: key, owner: owner, seq: watchSeq.Add(1), c: make(chan struct{}, 1), poll: b.pollFirst}
	if b.gates.on && owner == "" {
		// A mutex's waiter on MySQL blocks on the key's wake lock.
		w.gated, w.name = true, wakeLockName(b.table, key)
	}
	h.mu.Lock()
	h.watches.add(key, w)
	h.mu.Unlock()
	w.mu.Lock()
	if w.gated {
		var ctx context.Context
		ctx, w.stop = context.WithCancel(context.Background())
		go w.gateLoop(ctx)
	} else {
		w.timer = time.AfterFunc(w.poll, w.tick)
	}
	w.mu.Unlock()
	return w, nil
}

type localWatch struct {
	b          *Backend
	h          *localHub
	key, owner string
	seq        uint64 // when it began (watchSeq)
	c          chan struct{}

	mu     sync.Mutex
	poll   time.Duration
	timer  *time.Timer
	closed bool

	// A gated watch's (see gate.go), under mu.
	gated     bool
	name      string        // the key's wake lock
	stop      func()        // ends gateLoop
	conn      *sql.Conn     // the gate: nil until lent, and after it went to a holding
	id        int64         // the gate's CONNECTION_ID
	baton     chan struct{} // the gate has the wake lock, for an attempt; closed when one settles
	lent      bool          // an attempt runs on the gate
	refused   bool          // the gate has the wake lock, which it lets go of unless an attempt takes it
	given     *keptGate     // a released holding's wake lock, handed over in the process (handOver)
	lentGiven bool          // an attempt names given
}

func (w *localWatch) wake() { ring(w.c) }

// tick is the poll for the releases of other processes: it reads the
// key's row and wakes the waiter only if an attempt could now succeed (the
// key is free, or was handed to this fair waiter, or its family changed).
// The polls come further apart, doubling from pollFirst up to pollCap,
// and never later than the holder's lease ends.
func (w *localWatch) tick() {
	next := w.check()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.poll = min(2*w.poll, w.b.pollCap)
	d := w.poll/2 + rand.N(w.poll/2+1)
	if next > 0 && next < d {
		d = next
	}
	w.timer.Reset(d)
}

// check polls the key once, wakes the waiter if its turn may have come,
// and returns how long the holder's lease lasts (0: unknown).
func (w *localWatch) check() time.Duration {
	b, s := w.b, &w.b.fair.watch
	ctx, cancel := context.WithTimeout(context.Background(), b.pollCap+time.Second)
	defer cancel()
	var (
		r    row
		head string
	)
	err := b.scanHot(ctx, *s, s.args(w.key), r.scan(&head)...)
	switch {
	case err != nil || r.kind != 0:
		// No row (free), an error (the attempt will tell), or another
		// family's row, whose holds live elsewhere.
		w.wake()
	case w.owner != "" && r.owners == listed(w.owner) && r.left > 0:
		w.wake() // handed over
	case r.free() && (w.owner == "" || head == "" || head == w.owner):
		w.wake()
	case !r.free():
		return time.Duration(r.left)*time.Microsecond + time.Millisecond
	}
	return 0
}

func (w *localWatch) C() <-chan struct{} { return w.c }

func (w *localWatch) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.stop != nil {
		w.stop()
	}
	w.mu.Unlock()
	w.h.mu.Lock()
	w.h.watches.remove(w.key, w)
	w.h.mu.Unlock()
	if k := w.takeGiven(nil); k != nil {
		k.release() // nobody here took it: it wakes one waiter in the server
	}
	return nil
}

// watchSet is the watches of each key.
type watchSet[W comparable] map[string]map[W]struct{}

func (s watchSet[W]) add(key string, w W) {
	if s[key] == nil {
		s[key] = make(map[W]struct{})
	}
	s[key][w] = struct{}{}
}

func (s watchSet[W]) remove(key string, w W) {
	delete(s[key], w)
	if len(s[key]) == 0 {
		delete(s, key)
	}
}

// ring sends a wake-up on c unless one is pending already: one is enough.
func ring(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
