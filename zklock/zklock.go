package zklock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
)

// DefaultRoot is the znode under which locks live unless [WithRoot] is given.
const DefaultRoot = "/distlock"

// clockName is the child of the root that a client writes to learn the
// leader's time, when it finds a lease in its way that may have lapsed.
const clockName = ".clock"

// receiptTTL is how long a release is remembered, so that its repeat
// (after a lost reply) reports success.
const receiptTTL = 10 * time.Second

// refusalTTL is how long an owner's refused attempt is remembered, so
// that its retries look at the line before they make a node.
const refusalTTL = 30 * time.Second

// DefaultMaxSessionTimeout is ZooKeeper's default maxSessionTimeout (20
// ticks of 2s): the longest session an ensemble grants unless configured
// otherwise, and the longest [New] trusts unless [WithMaxSessionTimeout]
// says more.
const DefaultMaxSessionTimeout = 40 * time.Second

// Backend is a distlock backend on a ZooKeeper ensemble, over one client
// session. See the package documentation for the node scheme and what
// TTLs mean here. The methods of a Backend made from a nil *zk.Conn, a
// non-positive session timeout or an invalid option return an error
// wrapping driver.ErrInvalidBackend.
type Backend struct {
	conn       *zk.Conn
	ownsConn   bool
	root       string
	session    time.Duration // requested from the ensemble
	maxSession time.Duration // the most the ensemble grants, as the user states it
	negotiated *atomic.Int64 // ms the ensemble granted, when the backend opened conn; 0 unknown
	drift      func(ttl time.Duration) time.Duration
	opts       driver.OptionCheck // the first invalid option or argument of New, if any

	offset atomic.Int64 // leader's clock minus ours, in ms, from the last write

	// owners serializes the calls of one owner (striped by its hash), so
	// that a Release cannot run between a create and its reply, and miss
	// the node of an attempt that ctx abandoned.
	owners [64]sync.Mutex

	mu       sync.Mutex
	nodes    map[driver.LeaseID]*node       // this client's nodes, by key and owner
	lapses   map[driver.LeaseID]*time.Timer // each clears its node if its lease lapses (see watchLapseLocked)
	receipts map[driver.LeaseID]time.Time   // releases of this client, by when (see receipt)
	refused  map[driver.LeaseID]time.Time   // owners whose last attempt was refused, and left no node
	purged   time.Time                      // when refused was last rid of old entries
	plain    map[string][]*watch            // the open watches of plain mutex waiters, by key (see plainPlace)
	asked    map[string]time.Time           // keys by when a mutex attempt that kept no place was last refused (see Watch)
	lines    map[string]listing             // the last listing of each key's line by an attempt, until a watch takes it
	seen     map[string]seenLease           // other clients' nodes by path, as read lately (see recentLease)
	busy     map[string]time.Time           // keys by when this client last found others in their line
	sess     *session
	closed   chan struct{}
	once     sync.Once
}

var _ driver.Backend = (*Backend)(nil)

var (
	errNil    = fmt.Errorf("zklock: nil *Backend: %w", driver.ErrInvalidBackend)
	errClosed = fmt.Errorf("zklock: backend closed: %w", driver.ErrInvalidBackend)
)

// node is what this client knows of one of its nodes.
type node struct {
	path    string // "" while unknown: a create whose reply was lost
	token   uint64 // the node's creation zxid
	version int32  // its version after this client's last write
	data    nodeData
	reentry string    // the identity hash of a re-entrant lease's node, else ""
	wrote   time.Time // when this client sent its last write of the node, if known
	sess    int64     // the session of this client's last call that saw the node
	first   bool      // a watch saw the only node ahead of it leave: it is first in line
	tried   time.Time // when this client's last attempt that listed the line began
	watched time.Time // when a watch's listing that found the node waiting began, its watch then set
	retryAt time.Time // when the lease in the way of the last refused attempt ends
}

// session is one ZooKeeper session of the connection; lost closes when it
// is gone, and with it every ephemeral node it made.
type session struct {
	id   int64
	lost chan struct{}
}

// An Option configures a [Backend].
type Option func(*Backend)

// WithRoot sets the znode under which locks live (default [DefaultRoot]).
// Each key is a child of it, deleted by the ensemble once nobody holds or
// waits for the key (see the package doc). The root must be an absolute
// path other than "/", outside /zookeeper, without empty, "." or ".."
// parts, and of characters ZooKeeper accepts: no control characters,
// nothing beyond U+FFFF, and none of U+E000 to U+F8FF and U+FFF0 to
// U+FFFF. The backend's methods report another root as an error wrapping
// driver.ErrInvalidBackend.
func WithRoot(path string) Option {
	return func(b *Backend) {
		if err := checkRoot(path); err != nil {
			b.opts.Invalid("zklock", fmt.Sprintf("WithRoot(%q)", path), err.Error())
			return
		}
		b.root = path
	}
}

// WithMaxSessionTimeout states the ensemble's maxSessionTimeout (default
// [DefaultMaxSessionTimeout]), the longest session it grants: a session
// timeout given to [New] is trusted up to d only. Give it when the
// ensemble is configured with another maximum, lower (required for
// safety) or higher (to trust a longer session). A d that is not
// positive makes every method fail with an error wrapping
// driver.ErrInvalidBackend.
func WithMaxSessionTimeout(d time.Duration) Option {
	return func(b *Backend) {
		if d <= 0 {
			b.opts.Invalid("zklock", fmt.Sprintf("WithMaxSessionTimeout(%v)", d), "want a positive duration")
			return
		}
		b.maxSession = d
	}
}

// WithDrift sets the clock drift allowance subtracted from a lease's
// length (default driver.DefaultDrift). A nil f makes every method fail
// with an error wrapping driver.ErrInvalidBackend.
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) {
		if f == nil {
			b.opts.Invalid("zklock", "WithDrift(nil)", "want a drift function")
			return
		}
		b.drift = f
	}
}

// New returns a backend on conn, whose session timeout is the one given
// to zk.Connect. The ensemble grants at most its maxSessionTimeout, and
// New cannot see what it granted: it trusts the smaller of sessionTimeout
// and [DefaultMaxSessionTimeout], ZooKeeper's default maximum, unless
// [WithMaxSessionTimeout] states the ensemble's. An ensemble configured
// with a lower maximum than sessionTimeout must be stated, or a lease may
// be trusted after its session expired. No lease is trusted for longer
// than that session timeout less drift after the last call that reached
// the ensemble. Closing the backend leaves conn open.
func New(conn *zk.Conn, sessionTimeout time.Duration, opts ...Option) *Backend {
	b := &Backend{conn: conn, root: DefaultRoot, session: sessionTimeout, maxSession: DefaultMaxSessionTimeout,
		drift: driver.DefaultDrift, nodes: make(map[driver.LeaseID]*node), lapses: make(map[driver.LeaseID]*time.Timer), receipts: make(map[driver.LeaseID]time.Time),
		refused: make(map[driver.LeaseID]time.Time), plain: make(map[string][]*watch), busy: make(map[string]time.Time), lines: make(map[string]listing), asked: make(map[string]time.Time), seen: make(map[string]seenLease), closed: make(chan struct{})}
	switch {
	case conn == nil:
		b.opts.Invalid("zklock", "New", "nil *zk.Conn")
	case sessionTimeout <= 0:
		b.opts.Invalid("zklock", "New", fmt.Sprintf("session timeout %v is not positive", sessionTimeout))
	}
	for _, o := range opts {
		if o == nil {
			b.opts.Invalid("zklock", "New", "a nil Option")
			continue
		}
		o(b)
	}
	return b
}

// checkRoot reports whether root can hold the keys' nodes: an absolute
// znode path other than "/", without empty, "." or ".." parts, of
// characters that ZooKeeper accepts in a path (see pathRune), and outside
// /zookeeper, which the ensemble reserves.
func checkRoot(root string) error {
	if len(root) < 2 || root[0] != '/' || root[len(root)-1] == '/' {
		return fmt.Errorf("root %q is not an absolute znode path below /", root)
	}
	for _, part := range strings.Split(root[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("root %q has an empty, \".\" or \"..\" part", root)
		}
	}
	for _, r := range root {
		if !pathRune(r) {
			return fmt.Errorf("root %q has a character ZooKeeper refuses in a path (%U)", root, r)
		}
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return fmt.Errorf("root %q is under /zookeeper, which ZooKeeper reserves", root)
	}
	return nil
}

// pathRune reports whether ZooKeeper accepts r in a znode path. The
// servers refuse controls (C0, DEL and C1), UTF-16 surrogates (so
// every character beyond U+FFFF) and private use characters (U+D800 to
// U+F8FF), and U+FFF0 to U+FFFF; the client refuses bytes that are not
// UTF-8, which range reads as U+FFFD.
func pathRune(r rune) bool {
	return r >= 0x20 && !(r >= 0x7f && r <= 0x9f) && !(r >= 0xd800 && r <= 0xf8ff) && r < 0xfff0
}

// Capabilities implements driver.Backend: waiters are notified, fair ones
// by their predecessor's node only; read-write locks, semaphores and
// re-entrant locks.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// start checks b and ctx before a call.
func (b *Backend) start(ctx context.Context) error {
	if b == nil {
		return errNil
	}
	if err := b.opts.Err(); err != nil {
		return err
	}
	select {
	case <-b.closed:
		return errClosed
	default:
	}
	return ctx.Err()
}

// run runs f, a sequence of ZooKeeper calls, and returns its result, or
// ctx's error if ctx ends first: the client's calls take no context. The
// sequence then completes in the background; every method is idempotent
// per owner, so the caller's repeat sorts out what it did.
func run[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	c := make(chan result, 1)
	go func() {
		v, err := f()
		c <- result{v, err}
	}()
	select {
	case r := <-c:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// stripe returns the mutex of owner's calls: its FNV-1a hash picks one.
func (b *Backend) stripe(owner string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(owner); i++ {
		h = (h ^ uint32(owner[i])) * 16777619
	}
	return &b.owners[h%uint32(len(b.owners))]
}

// serial runs f while holding the stripe of owner.
func serial[T any](b *Backend, owner string, f func() (T, error)) func() (T, error) {
	return func() (T, error) {
		m := b.stripe(owner)
		m.Lock()
		defer m.Unlock()
		return f()
	}
}

// lineName is the child of a key's node under which the key's holders and
// waiters queue. Both are containers: the ensemble deletes the line once
// it is left empty, and the key's node, which keeps the last token, at
// its next check of containers after that.
const lineName = "line"

// linePath is where key's holders and waiters queue.
func (b *Backend) linePath(key string) string { return b.root + "/" + escapeKey(key) + "/" + lineName }

// keyNode returns the key's node of a line: where its last token is kept.
func keyNode(line string) string { return line[:len(line)-len(lineName)-1] }

// sessionTimeout is the session timeout the ensemble granted, as far as
// the backend knows: what the client requested, lowered to the granted
// timeout if the backend learned it, else to the stated maximum.
func (b *Backend) sessionTimeout() time.Duration {
	if b.negotiated != nil {
		if ms := b.negotiated.Load(); ms > 0 {
			return min(b.session, time.Duration(ms)*time.Millisecond)
		}
	}
	return min(b.session, b.maxSession)
}

// validFor is how long after a call that reached the ensemble a lease of
// ttl is trusted: the lease, and the session, may end no sooner.
func (b *Backend) validFor(ttl time.Duration) time.Duration {
	v := min(ttl, b.sessionTimeout())
	return max(v-b.drift(v), time.Millisecond)
}

// noteClock records the leader's clock from the mtime of a write.
func (b *Backend) noteClock(mtime int64) {
	b.offset.Store(mtime - time.Now().UnixMilli())
}

// leaderNow estimates the leader's clock, for Inspect (which writes nothing).
func (b *Backend) leaderNow() int64 { return time.Now().UnixMilli() + b.offset.Load() }

// checkKey refuses a key that no node can stand for, for the methods
// given a key alone (Watch, Inspect, Break): the contract's key check.
func checkKey(key string) error {
	if err := driver.ValidateKey(key); err != nil {
		return fmt.Errorf("zklock: %w", err)
	}
	return nil
}

// Acquire implements driver.Backend. A first attempt creates the owner's
// node, in one round trip when the node is alone in its line, and lists
// the line otherwise; a waiter told by its watch that it is first takes
// the lock without a round trip (see handedOver). A blocked one checks whether
// the lease in its way lapsed, and keeps its place (Queue > 0) or leaves.
// The retry of a refused attempt that kept no place lists the line first,
// and makes a node only if it would get in. A re-entrant request is the
// same, on its identity's node (see the package doc).
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := req.Validate(b.Capabilities()); err != nil {
		return driver.Grant{}, fmt.Errorf("zklock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	return run(ctx, serial(b, req.Owner, func() (driver.Grant, error) {
		// An attempt that waited for the owner's stripe until its caller
		// gave up is not made: the caller may have sent its release
		// already, and an attempt after it would leave a node nobody
		// releases.
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, err
		}
		if req.Reentry != "" {
			return b.acquireReentrant(req)
		}
		return b.acquire(req)
	}))
}

// attempt is one Acquire of a request without a re-entrant identity, in
// the phases acquire runs in order: answered from the waiter's watch
// (fromWatch), a repeat that renews its holding (renew), a look at the
// line before making a node (look), the node's making (make), and the
// judging of the line (judge), which grants, refuses, or clears a lapsed
// node and lists the line again. Each phase either ends the attempt or
// hands it to the next:
//
//	locate     the owner's node, if it has one (a repeat, a waiter)
//	fromWatch  a waiter's turn, or its node still behind: grant or refuse, no request
//	renew      a holder's repeat: rewrite its node, or lose it if it vanished
//	look       no node, and a retry or a busy key: list first, refuse if blocked
//	make       no node: create it; alone in its line, it is granted
//	judge      list the line: first (grant), a lapsed node in the way
//	           (clear it, list again), another family (KindError), or
//	           blocked (wait: keep the place, or delete the node)
type attempt struct {
	b       *Backend
	req     driver.Request
	parent  string         // the key's line
	h       string         // the owner's hash, in its node's name
	lk      driver.LeaseID // the key and the owner
	data    nodeData       // the node's data as a holding
	n       *node          // the owner's node; nil while it has none
	now     int64          // the leader's clock at this client's last write, or 0
	stamped bool           // the node's data holds the lease asked for
	tried   time.Time
}

func (b *Backend) acquire(req driver.Request) (driver.Grant, error) {
	a := attempt{b: b, req: req, parent: b.linePath(req.Key), h: ownerHash(req.Owner), lk: req.ID(), stamped: true}
	if req.Kind == driver.Exclusive && req.Queue <= 0 && b.bindPlain(a.lk) {
		a.req.Queue = plainPlace(req.TTL)
	}
	a.data = nodeData{Span: ms(req.TTL), Held: true, Limit: req.Limit, Since: time.Now().UnixMilli(), Meta: req.Meta}
	var err error
	if a.n, err = b.locate(a.lk, a.parent); err != nil {
		return driver.Grant{}, err
	}
	if g, ok := a.fromWatch(); ok {
		return g, nil
	}
	a.tried = time.Now()
	if err := a.renew(); err != nil {
		return driver.Grant{}, err
	}
	if g, done, err := a.look(); done {
		return g, err
	}
	if g, done, err := a.make(); done {
		return g, err
	}
	return a.judge()
}

// fromWatch answers a waiter's attempt without a round trip, from what
// its watch saw: its turn came (see handedOver), or the node ahead is
// still there (see stillWaiting). A waiter's node is marked held only if
// it gets in: until then its data does not hold the lease asked for.
func (a *attempt) fromWatch() (driver.Grant, bool) {
	n := a.n
	if n == nil || n.data.Held {
		return driver.Grant{}, false
	}
	if g, ok := a.b.handedOver(a.lk, n, a.req); ok {
		return g, true
	}
	if g, ok := a.b.stillWaiting(n, a.req); ok {
		return g, true
	}
	a.stamped = false
	return driver.Grant{}, false
}

// renew rewrites the node of a repeat of a granted attempt, which renews
// the holding; a node gone meanwhile (it lapsed, or its session expired)
// leaves the attempt without one, to start over.
func (a *attempt) renew() error {
	n := a.n
	if n == nil || !n.data.Held {
		return nil
	}
	a.data.Since = n.data.Since
	sent := time.Now()
	st, err := a.b.conn.Set(n.path, a.data.encode(), -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		a.b.forget(a.lk)
		a.n = nil
	case err != nil:
		return err
	default:
		n.token, n.data, n.version, a.now, n.wrote = uint64(st.Czxid), a.data, st.Version, st.Mtime, sent
		a.b.noteClock(st.Mtime)
	}
	return nil
}

// look lists the line before the attempt makes a node, when making one
// would change the line for nothing; done when that refuses the attempt
// (or fails).
//
// A retry of a refused attempt looks before it makes a node, so that a
// waiter that cannot get in changes nothing in the line: readers and
// permits wait for any node to leave, and would wake up at its node's
// coming and going. A mutex's waiters watch the holder only, so a mutex
// waiter makes its node at once: looking first would cost it a round
// trip, and the race for a released lock to the holder that asks again
// straight away (with 8 workers on one key, waiters then starved for the
// whole run). A mutex attempt that keeps no place looks first too while
// the key is busy (a holder that asks again at once, a plain Lock's first
// attempt): it would make a node only to delete it.
func (a *attempt) look() (g driver.Grant, done bool, err error) {
	b, req := a.b, a.req
	if a.n != nil || !(req.Kind != driver.Exclusive && b.wasRefused(a.lk) || req.Kind == driver.Exclusive && req.Queue <= 0 && b.isBusy(req.Key)) {
		return driver.Grant{}, false, nil
	}
	g, blocked, err := b.peek(req, a.parent, a.h)
	if blocked {
		b.setRefused(a.lk, true)
		b.notePlainRefusal(req)
	}
	return g, err != nil || blocked, err
}

// make creates the owner's node if it has none; done when that grants
// the lock (the node is alone in its line) or fails.
func (a *attempt) make() (g driver.Grant, done bool, err error) {
	if a.n != nil {
		return driver.Grant{}, false, nil
	}
	b, req := a.b, a.req
	made := a.data
	if req.Queue > 0 {
		made.Wait = ms(req.Queue) // if it must wait, it keeps this node as its place
	}
	c, err := b.create(a.lk, a.parent, namePrefix(req.Kind, req.Limit)+"-"+a.h+"-", made, zk.FlagEphemeral|zk.FlagSequence, "")
	if err != nil {
		return driver.Grant{}, true, err
	}
	a.n, a.now = c.n, c.now
	if c.kids == 1 { // alone in the line: first from its making on, of no kind but its own
		return b.granted(a.lk, a.n, req), true, nil
	}
	b.setBusy(req.Key)
	// A node that waited, for however short a time, may have been judged
	// by its Wait: it is written as a holding if it gets in.
	a.stamped = made.Wait == 0
	return driver.Grant{}, false, nil
}

// errVanished is the error of an attempt whose node another client
// deleted (its lease, or its place, lapsed): the caller tries again.
var errVanished = errors.New("zklock: the attempt's node vanished (expired by another client); retry")

// judge lists the line and judges the attempt's place in it: a node of
// another family ahead refuses it with a *driver.KindError (once lapsed
// ones are cleared); nothing in the way grants it; else a lapsed lease
// in the way is cleared and the line listed again (three times at most),
// or the attempt is refused, and waits or leaves (see Backend.wait).
func (a *attempt) judge() (driver.Grant, error) {
	b, req, n := a.b, a.req, a.n
	for tries := 0; ; tries++ {
		listed := time.Now()
		names, st, err := b.conn.Children(a.parent)
		if err != nil {
			return driver.Grant{}, err
		}
		kids := line(names)
		i := find(kids, a.h)
		if i < 0 {
			b.forget(a.lk)
			return driver.Grant{}, errVanished
		}
		if fs := foreign(kids[:i], req.Kind, req.Limit); len(fs) > 0 {
			freed, _, err := b.clearLapsed(a.parent, fs, kids[0].seq, &a.now, lookNow)
			if err != nil {
				return driver.Grant{}, err
			}
			if freed && tries < 3 {
				continue
			}
			if err := b.conn.Delete(n.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, err
			}
			b.forget(a.lk)
			return driver.Grant{}, kindError(req, fs[0])
		}
		bs := blockers(kids, i, req.Limit)
		if len(bs) == 0 {
			return a.first()
		}
		clear := b.clearLapsed
		if req.Kind == driver.Exclusive {
			// Only the first node holds a mutex: a lapsed node behind it
			// is cleared once it is first, by the attempt after it.
			clear = b.holderOf
		}
		look := lookRecent
		if req.Queue > 0 {
			look = lookLater // a waiter keeps its place, and its watch wakes it
		}
		freed, until, err := clear(a.parent, bs, kids[0].seq, &a.now, look)
		if err != nil {
			return driver.Grant{}, err
		}
		if a.now == 0 {
			a.now = b.leaderNow()
		}
		retry := max(time.Duration(until-a.now)*time.Millisecond, time.Millisecond)
		retryAt := time.Now().Add(retry)
		switch {
		case freed:
			if tries < 3 {
				continue
			}
			retry, retryAt = time.Millisecond, time.Now().Add(time.Millisecond)
		case until == lapseUnread:
			// The waiter looks again, and reads the holder then, at its
			// next attempt, which renews its place within a third of it.
			retry, retryAt = 0, time.Now().Add(req.Queue/3)
		}
		n.tried, n.retryAt = a.tried, retryAt
		b.noteLine(req.Key, listing{names: names, cversion: st.Cversion, at: listed})
		b.placed(a.lk)
		return b.wait(a.lk, n, req, retry)
	}
}

// first grants the attempt, whose node is first in line: nothing can come
// ahead of it now. A node not stamped as a holding is granted from its
// place, written lately, which holds it for a while yet (see fromPlace);
// else a write starts its lease.
func (a *attempt) first() (driver.Grant, error) {
	b, n := a.b, a.n
	if !a.stamped {
		if g, ok := b.fromPlace(a.lk, n, a.req); ok {
			return g, nil
		}
		sent := time.Now()
		st, err := b.conn.Set(n.path, a.data.encode(), -1)
		if errors.Is(err, zk.ErrNoNode) {
			b.forget(a.lk)
			return driver.Grant{}, errVanished
		}
		if err != nil {
			return driver.Grant{}, err
		}
		n.data, n.version, n.wrote = a.data, st.Version, sent
		b.noteClock(st.Mtime)
	}
	b.remember(a.lk, n)
	return b.granted(a.lk, n, a.req), nil
}

// handedOver grants req at once, without a round trip, to the owner's
// node n waiting in line, once a watch saw the only node ahead of it leave
// (see watch.arm): a node that comes later is behind it. Its lease is
// what is left of its place, counted from this client's last write of
// it; the caller extends it at once (a short grant). It declines when too
// little is left, or when the session changed since (the node went with
// the old one): the attempt then writes and lists as usual.
func (b *Backend) handedOver(lk driver.LeaseID, n *node, req driver.Request) (driver.Grant, bool) {
	if !n.first || n.data.Held {
		return driver.Grant{}, false
	}
	return b.fromPlace(lk, n, req)
}

// fromPlace grants req without a round trip to the owner's node n, first
// in line: its lease is what is left of its place (the shorter of its
// Span and Wait), counted from this client's last write of it, which
// every other client judges it by at least. It declines when too little
// is left, or when the session changed since (the node went with the old
// one).
func (b *Backend) fromPlace(lk driver.LeaseID, n *node, req driver.Request) (driver.Grant, bool) {
	if n.wrote.IsZero() || n.reentry != "" {
		return driver.Grant{}, false
	}
	valid := b.validFor(time.Duration(n.data.lease(false)) * time.Millisecond)
	left := time.Until(n.wrote.Add(valid))
	if left < valid/2 || n.sess != b.conn.SessionID() {
		return driver.Grant{}, false
	}
	left = min(left, b.validFor(req.TTL))
	// The node's next write (its renewal) stamps it as a holding, first
	// in line, judged by its Span alone.
	n.data.Held, n.data.Wait, n.data.Since, n.data.Meta = true, 0, time.Now().UnixMilli(), req.Meta
	b.mu.Lock()
	if m := b.nodes[lk]; m != nil && m.path == n.path && m.version == n.version {
		m.data = n.data
	}
	b.mu.Unlock()
	b.setRefused(lk, false)
	return driver.Grant{Acquired: true, Token: n.token, ValidFor: left, Lost: b.lostChan()}, true
}

// stillWaiting refuses the attempt of a waiter without a round trip when
// its watch, set by a listing made after the waiter's last attempt, has
// not fired since: the node ahead is still there (or the watch would have
// listed the line again, and marked the waiter first). It declines once
// the lease in the way may have lapsed, or the place needs renewing, or
// the session changed: the attempt then lists the line as usual. A
// waiter that subscribes retries at once, and its watch's listing has
// just answered that retry.
func (b *Backend) stillWaiting(n *node, req driver.Request) (driver.Grant, bool) {
	if n.tried.IsZero() || !n.watched.After(n.tried) || req.Queue <= 0 || n.sess != b.conn.SessionID() {
		return driver.Grant{}, false
	}
	left := time.Until(n.retryAt)
	if left <= 0 || n.data.lease(false) != ms(req.Queue) || time.Since(n.wrote) >= req.Queue/3 {
		return driver.Grant{}, false
	}
	return driver.Grant{RetryAfter: left}, true
}

// markWatched records that a watch's listing, begun at start, found the
// owner's node, named name, waiting, and set the watch on the node ahead.
func (b *Backend) markWatched(lk driver.LeaseID, name string, start time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[lk]; n != nil && n.path != "" && path.Base(n.path) == name && start.After(n.watched) {
		n.watched = start
	}
}

// unwatch forgets that a watch listed the line for the owner's node: the
// watch is being set again, and may find something else.
func (b *Backend) unwatch(lk driver.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[lk]; n != nil {
		n.watched = time.Time{}
	}
}

// markFirst records that the owner's node, named name, is first in line.
func (b *Backend) markFirst(lk driver.LeaseID, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[lk]; n != nil && n.path != "" && path.Base(n.path) == name {
		n.first = true
	}
}

// plainPlace is how long a plain mutex waiter's place in line lasts
// unrenewed. A plain waiter keeps a place while its Lock waits, as a fair
// one does, so that a holder that asks again at once queues behind it.
// The waiter's attempts renew it, as often as its safety poll (a second
// by default) or the lease in its way says; the place lasts as long as
// the lease, and at least as long as a fair waiter's place by default.
// The waiter's Lock removes it when it returns (when the watch closes),
// or its session does.
func plainPlace(ttl time.Duration) time.Duration { return max(ttl, 3*time.Second) }

// bindPlain reports whether the owner's attempt is a plain Lock's that
// waits, and so keeps a place: the owner's watch is open, or the owner's
// last attempt was refused and one of the key's plain watches, opened by
// the Lock after that refusal, has no owner yet (the waiters of one
// Client for a plain mutex ask one at a time). A TryLock's owner is new
// at each call, and never refused before.
func (b *Backend) bindPlain(lk driver.LeaseID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var free *watch
	for _, w := range b.plain[lk.Key] {
		switch w.owner() {
		case lk.Owner:
			return true
		case "":
			free = w
		}
	}
	if free == nil {
		return false
	}
	if at, ok := b.refused[lk]; !ok || time.Since(at) >= refusalTTL {
		return false
	}
	free.bind(lk.Owner)
	return true
}

// notePlainRefusal records that req, a mutex attempt that kept no place,
// was refused: a plain Lock's first attempt, whose watch comes next (see
// Watch), or a TryLock's.
func (b *Backend) notePlainRefusal(req driver.Request) {
	if req.Kind != driver.Exclusive || req.Queue > 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	pruneStale(b.asked, func(at time.Time) time.Time { return at })
	b.asked[req.Key] = time.Now()
}

// takePlainRefusal reports, and forgets, whether a mutex attempt that
// kept no place was refused on key within lineFresh.
func (b *Backend) takePlainRefusal(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.asked[key]
	delete(b.asked, key)
	return ok && time.Since(at) < lineFresh
}

// granted is the grant of req to the owner's node n, just written.
func (b *Backend) granted(lk driver.LeaseID, n *node, req driver.Request) driver.Grant {
	b.setRefused(lk, false)
	return driver.Grant{Acquired: true, Token: n.token, ValidFor: b.validFor(req.TTL), Lost: b.lostChan()}
}

// wait ends a refused attempt: a waiter keeps its place for req.Queue,
// an attempt that does not wait removes its node.
func (b *Backend) wait(lk driver.LeaseID, n *node, req driver.Request, retry time.Duration) (driver.Grant, error) {
	if req.Queue <= 0 {
		if err := b.conn.Delete(n.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, err
		}
		b.forget(lk)
		b.setRefused(lk, true)
		b.notePlainRefusal(req)
		return driver.Grant{RetryAfter: retry}, nil
	}
	place := nodeData{Span: ms(req.Queue), Limit: req.Limit, Meta: req.Meta}
	if n.data.lease(false) == place.Span && !n.wrote.IsZero() && time.Since(n.wrote) < req.Queue/3 {
		// Made or renewed lately as a place of this length: it lasts at
		// least two thirds of Queue, and the waiter tries again within
		// a third. This client knows it as a waiter's.
		n.data.Held = false
		b.remember(lk, n)
		return driver.Grant{RetryAfter: retry}, nil
	}
	n.data = place
	n.wrote = time.Now()
	st, err := b.conn.Set(n.path, n.data.encode(), -1)
	if errors.Is(err, zk.ErrNoNode) {
		b.forget(lk)
		return driver.Grant{RetryAfter: time.Millisecond}, nil
	}
	if err != nil {
		return driver.Grant{}, err
	}
	b.noteClock(st.Mtime)
	n.version = st.Version
	b.remember(lk, n)
	return driver.Grant{RetryAfter: retry}, nil
}

// peek lists the line of a key as it is, and reports whether a node the
// request appended would be blocked (and then the grant refusing it),
// after clearing the lapsed leases in the way. It writes nothing unless
// a lease in the way may have lapsed.
func (b *Backend) peek(req driver.Request, parent, h string) (g driver.Grant, blocked bool, err error) {
	// A first attempt is refused only by a holding that was there when
	// it began, and the server may lag behind a release made before: a
	// mutex's attempt, which looks only while its key is busy, syncs the
	// server before it lists the line.
	synced := req.Kind == driver.Exclusive
	if synced {
		if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, false, err
		}
	}
	for tries := 0; ; tries++ {
		listed := time.Now()
		names, st, err := b.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, false, nil
		}
		if err != nil {
			return driver.Grant{}, false, err
		}
		kids := line(names)
		var now int64 // learned only if needed
		if fs := foreign(kids, req.Kind, req.Limit); len(fs) > 0 {
			freed, _, err := b.clearLapsed(parent, fs, kids[0].seq, &now, lookNow)
			if err != nil {
				return driver.Grant{}, false, err
			}
			if freed && tries < 3 {
				continue
			}
			if !synced {
				// The server may lag behind releases made before this
				// call: a mismatch, final for the caller, is confirmed.
				if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return driver.Grant{}, false, err
				}
				synced = true
				continue
			}
			return driver.Grant{}, false, kindError(req, fs[0])
		}
		kids = append(kids, child{kind: req.Kind, limit: req.Limit, hash: h, seq: math.MaxInt64})
		bs := blockers(kids, len(kids)-1, req.Limit)
		if len(bs) == 0 {
			return driver.Grant{}, false, nil
		}
		clear := b.clearLapsed
		if req.Kind == driver.Exclusive {
			clear = b.holderOf // see acquire
		}
		freed, until, err := clear(parent, bs, kids[0].seq, &now, lookNow)
		if err != nil {
			return driver.Grant{}, false, err
		}
		if freed {
			if tries < 3 {
				continue // a node left: look again, it may have been another waiter's
			}
			return driver.Grant{RetryAfter: time.Millisecond}, true, nil
		}
		if now == 0 {
			now = b.leaderNow()
		}
		b.noteLine(req.Key, listing{names: names, cversion: st.Cversion, at: listed})
		return driver.Grant{RetryAfter: max(time.Duration(until-now)*time.Millisecond, time.Millisecond)}, true, nil
	}
}

// listing is one listing of a key's line, begun at at.
type listing struct {
	names    []string
	cversion int32
	at       time.Time
}

// noteLine keeps l, the listing of key's line by a refused attempt, for
// the waiter's watch (see watch.arm).
func (b *Backend) noteLine(key string, l listing) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pruneStale(b.lines, func(l listing) time.Time { return l.at })
	b.lines[key] = l
}

// pruneStale deletes the entries of m older than lineFresh, by at, once
// m has more than a few.
func pruneStale[K comparable, V any](m map[K]V, at func(V) time.Time) {
	if len(m) <= 64 {
		return
	}
	for k, v := range m {
		if time.Since(at(v)) >= lineFresh {
			delete(m, k)
		}
	}
}

// takeLine returns, and forgets, the listing of key's line an attempt
// began after since, if there is one.
func (b *Backend) takeLine(key string, since time.Time) (listing, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.lines[key]
	if !ok || !l.at.After(since) {
		return listing{}, false
	}
	delete(b.lines, key)
	return l, true
}

// holderOf is clearLapsed for a mutex's line ahead of an attempt, bs,
// whose first node holds it: it looks for the first node of bs still
// there, and clears it if its lease lapsed. A node gone since the listing
// (or cleared) lets the next one hold, which is then the line's first,
// judged as such (nodes ahead of a node only leave): no listing again.
// It reports freed when every node of bs is gone.
func (b *Backend) holderOf(parent string, bs []child, _ int64, now *int64, look look) (freed bool, until int64, err error) {
	for j, c := range bs {
		if freed, until, err = b.clearLapsed(parent, bs[j:j+1], c.seq, now, look); err != nil || !freed {
			return freed, until, err
		}
	}
	return true, until, nil
}

// seenLease is what this client last read of another's node: when it was
// last written, on the leader's clock, and its lease.
type seenLease struct {
	mtime      int64
	span, wait int64
	at         time.Time // when it was read
	unread     bool      // only sighted, by a waiter that put off its read (see lookLater)
}

// noteLease records a reading of the node at path.
func (b *Backend) noteLease(path string, mtime int64, d nodeData) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pruneStale(b.seen, func(s seenLease) time.Time { return s.at })
	b.seen[path] = seenLease{mtime: mtime, span: d.Span, wait: d.Wait, at: time.Now()}
}

// recentLease returns when the lease of the node at path ends, on the
// leader's clock, by this client's reading of it within lineFresh. A
// later write of the node only renews it, or shortens its lease by a
// renewal of a shorter TTL: a waiter then clears it a look later.
func (b *Backend) recentLease(path string, first bool) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.seen[path]
	if !ok || s.unread || time.Since(s.at) >= lineFresh {
		return 0, false
	}
	return s.mtime + nodeData{Span: s.span, Wait: s.wait}.lease(first), true
}

// sighted reports whether this client has not yet sighted the node at
// path in the way of a waiter, and records the sighting: the waiter's
// attempt puts off reading it (see lookLater). A node sighted, or read,
// before is read.
func (b *Backend) sighted(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[path]; ok {
		return false
	}
	pruneStale(b.seen, func(s seenLease) time.Time { return s.at })
	b.seen[path] = seenLease{unread: true, at: time.Now()}
	return true
}

// busyFor is how long a key stays busy (see isBusy) after this client
// last found others in its line.
const busyFor = time.Second

// isBusy reports whether this client found others in key's line lately.
func (b *Backend) isBusy(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.busy[key]
	return ok && time.Since(at) < busyFor
}

// setBusy records that this client found others in key's line, forgetting
// the keys it has not found busy for a while.
func (b *Backend) setBusy(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if len(b.busy) > 64 {
		for k, at := range b.busy {
			if now.Sub(at) >= busyFor {
				delete(b.busy, k)
			}
		}
	}
	b.busy[key] = now
}

// wasRefused reports whether the owner's last attempt was refused, and
// left no node.
func (b *Backend) wasRefused(lk driver.LeaseID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.refused[lk]
	return ok && time.Since(at) < refusalTTL
}

// setRefused records whether the owner's last attempt was refused,
// forgetting the refusals of owners that stopped trying.
func (b *Backend) setRefused(lk driver.LeaseID, refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !refused {
		delete(b.refused, lk)
		return
	}
	now := time.Now()
	b.refused[lk] = now
	if now.Sub(b.purged) > refusalTTL {
		for r, at := range b.refused {
			if now.Sub(at) > refusalTTL {
				delete(b.refused, r)
			}
		}
		b.purged = now
	}
}

// makeTries bounds the rounds in which create makes the nodes its node
// needs: a container left empty may be deleted between those and its own.
const makeTries = 4

// created is the outcome of create: the node, the leader's clock at its
// creation, and how many children the line had just after it.
type created struct {
	n    *node
	now  int64
	kids int32
}

// create makes the owner's node (reentry: a re-entrant lease's, for that
// identity hash), in one transaction with a write of the line's own data,
// whose stat gives the transaction's zxid (the new node's creation zxid:
// its fencing token), the leader's time, and the number of children the
// line has with the new node: a node alone in its line is first, and
// needs no listing. The owner is marked uncertain first, so that if the
// reply is lost, the next call looks for the node by its name instead of
// making another.
func (b *Backend) create(lk driver.LeaseID, parent, name string, data nodeData, flags int32, reentry string) (created, error) {
	b.mu.Lock()
	b.nodes[lk] = &node{reentry: reentry}
	b.mu.Unlock()
	const ( // the replies of the transaction
		madeNode    = 0 // the owner's node: its path
		touchedLine = 1 // the line's write: its stat
	)
	for tries := 0; ; tries++ {
		sent := time.Now()
		res, err := b.conn.Multi(
			&zk.CreateRequest{Path: parent + "/" + name, Data: data.encode(), Acl: worldACL, Flags: flags},
			&zk.SetDataRequest{Path: parent, Version: -1},
		)
		if errors.Is(err, zk.ErrNoNode) && tries < makeTries {
			if err := b.makeLine(parent, tries > 0); err != nil {
				return created{}, err
			}
			continue
		}
		if err != nil {
			return created{}, err
		}
		if len(res) != 2 || res[touchedLine].Stat == nil {
			return created{}, errors.New("zklock: malformed multi reply")
		}
		st := res[touchedLine].Stat
		b.noteClock(st.Mtime)
		n := &node{path: res[madeNode].String, token: uint64(st.Mzxid), data: data, reentry: reentry, wrote: sent}
		b.remember(lk, n)
		return created{n: n, now: st.Mtime, kids: st.NumChildren}, nil
	}
}

// worldACL is the ACL of every node: zk.WorldACL makes a new slice each call.
var worldACL = zk.WorldACL(zk.PermAll)

// makeLine creates the key's node and its line, as containers, and with
// root (or when the key's node cannot be made), the root and its clock
// node first.
func (b *Backend) makeLine(line string, root bool) error {
	if root {
		var paths []string
		for i := 1; i < len(b.root); i++ {
			if b.root[i] == '/' {
				paths = append(paths, b.root[:i])
			}
		}
		for _, p := range append(paths, b.root, b.root+"/"+clockName) {
			if _, err := b.conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("zklock: creating %s: %w", p, err)
			}
		}
	}
	for _, p := range []string{keyNode(line), line} {
		_, err := b.conn.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
		switch {
		case errors.Is(err, zk.ErrNoNode) && !root:
			return b.makeLine(line, true)
		case errors.Is(err, zk.ErrNoNode):
			return nil // the key's node was deleted as it was left empty: the next try makes it again
		case err != nil && !errors.Is(err, zk.ErrNodeExists):
			return fmt.Errorf("zklock: creating %s: %w", p, err)
		}
	}
	return nil
}

// locate returns the owner's node: known to this client, or found by name
// after a call whose reply was lost. It is nil when there is none.
func (b *Backend) locate(lk driver.LeaseID, parent string) (*node, error) {
	b.mu.Lock()
	n, ok := b.nodes[lk]
	var c node
	if ok {
		c = *n // a watch may mark the node meanwhile (markFirst, unwatch)
	}
	b.mu.Unlock()
	if ok && c.path != "" {
		return &c, nil
	}
	if !ok {
		return nil, nil
	}
	// The node may have been made just before the connection was lost,
	// and this server, another one perhaps, may lag behind the leader:
	// sync it first, or it may not show the node yet.
	if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	names, _, err := b.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		b.forget(lk)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kids := line(names)
	i := find(kids, ownerHash(lk.Owner))
	if i < 0 {
		b.forget(lk)
		return nil, nil
	}
	raw, st, err := b.conn.Get(parent + "/" + kids[i].name)
	if errors.Is(err, zk.ErrNoNode) {
		b.forget(lk)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n = &node{path: parent + "/" + kids[i].name, token: uint64(st.Czxid), version: st.Version, data: decodeData(raw)}
	c = *n // before remember: from then on the node is shared
	b.remember(lk, n)
	return &c, nil
}

// entry returns a copy of what this client knows of the owner's node.
func (b *Backend) entry(lk driver.LeaseID) (node, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.nodes[lk]
	if !ok {
		return node{}, false
	}
	return *n, true
}

func (b *Backend) remember(lk driver.LeaseID, n *node) {
	c := *n
	c.sess = b.conn.SessionID()
	b.mu.Lock()
	if old := b.nodes[lk]; old != nil && old.path == c.path {
		// Learned by a watch meanwhile: the node is still there.
		c.first = c.first || old.first
		if old.watched.After(c.watched) {
			c.watched = old.watched
		}
	}
	b.nodes[lk] = &c
	b.watchLapseLocked(lk, &c)
	b.mu.Unlock()
}

func (b *Backend) forget(lk driver.LeaseID) {
	b.mu.Lock()
	delete(b.nodes, lk)
	b.watchLapseLocked(lk, nil)
	b.mu.Unlock()
}

// lapseMargin is how long after its lease's end (by this client's clock,
// drift allowed for) a node of this client's is cleared.
const lapseMargin = 100 * time.Millisecond

// watchLapseLocked arranges for n, the owner's node as this client last
// wrote it, to be deleted once its lease (or a waiter's place) lapses
// unrenewed; nil stops watching. Other clients delete a lapsed node only
// when it is in their way: without this, the node of a holder that
// stopped renewing would stay as long as its session, and with it the
// key's line and node. The delete is conditional on the node's version,
// so that a later write (a renewal by another hold of a re-entrant lease)
// wins. The node's lease ends at the latest Span after this client's last
// write, which the leader stamped before this client learned of it.
func (b *Backend) watchLapseLocked(lk driver.LeaseID, n *node) {
	if t := b.lapses[lk]; t != nil {
		t.Stop()
		delete(b.lapses, lk)
	}
	if n == nil || n.path == "" || n.data.Span <= 0 {
		return
	}
	span := time.Duration(n.data.Span) * time.Millisecond
	path, version := n.path, n.version
	b.lapses[lk] = time.AfterFunc(span+b.drift(span)+lapseMargin, func() { b.clearOwn(lk, path, version) })
}

// clearOwn deletes the owner's node at path if this client's last write
// of it was version: its lease lapsed.
func (b *Backend) clearOwn(lk driver.LeaseID, path string, version int32) {
	_, _ = serial(b, lk.Owner, func() (struct{}, error) {
		select {
		case <-b.closed:
			return struct{}{}, nil
		default:
		}
		b.mu.Lock()
		n, ok := b.nodes[lk]
		if !ok || n.path != path || n.version != version {
			b.mu.Unlock()
			return struct{}{}, nil // renewed, or released, since
		}
		c := *n
		b.mu.Unlock()
		for range 3 { // the key's last token may move meanwhile
			err := b.deleteNode(path[:strings.LastIndexByte(path, '/')], &c, version)
			if !errors.Is(err, zk.ErrBadVersion) {
				if err == nil || errors.Is(err, zk.ErrNoNode) {
					b.mu.Lock()
					if n, ok := b.nodes[lk]; ok && n.path == path && n.version == version {
						delete(b.nodes, lk)
						delete(b.lapses, lk)
					}
					b.mu.Unlock()
				}
				break
			}
		}
		return struct{}{}, nil
	})()
}

// look says how fresh the reading of a node in the way must be before
// an attempt judges its lease.
type look int

const (
	// lookNow reads every node in the way: an attempt whose refusal the
	// caller takes as final (TryLock), or that must know what is in its
	// way.
	lookNow look = iota
	// lookRecent trusts this client's reading of a node within lineFresh
	// while the node's lease has not lapsed by it (see recentLease): a
	// waiter's attempt, whose refusal only puts off its next look.
	lookRecent
	// lookLater is lookRecent for a waiter that keeps its place in line:
	// it does not read a holder it sights for the first time (the lapse
	// is then lapseUnread), and reads it at its next attempt, which
	// renews its place. Its watch wakes it when the holder leaves: only a
	// holder whose lease lapses unreleased is seen later, by at most one
	// of the waiter's safety polls, and the holders that come and go in
	// the line's turn cost no read at all.
	lookLater
)

// lapseUnread is the lapse clearLapsed reports for a holder it has not
// read (see lookLater): unknown.
const lapseUnread int64 = -1

// clearLapsed looks at the nodes in the way, in line order (head is the
// sequence of the line's first node, whose lease is judged by its Span
// alone; see nodeData.Wait): one whose
// lease (or place in line) lapsed on the leader's clock is deleted, unless
// it was renewed meanwhile (the delete is conditional on its version). It
// stops at the first node gone, and reports whether one went, and when
// the lease in the way ends: the first node's, or for a semaphore the
// first to end among the permits. *now is the leader's clock at the
// caller's last write, or 0: then a write learns it if a node seems to
// have lapsed. How fresh a reading of each node must be, look says.
func (b *Backend) clearLapsed(parent string, bs []child, head int64, now *int64, look look) (freed bool, until int64, err error) {
	for i, c := range bs {
		p := parent + "/" + c.name
		if look >= lookRecent {
			if lapse, ok := b.recentLease(p, c.seq == head); ok && lapse > max(*now, b.leaderNow()) {
				if i == 0 || c.kind == driver.Permit && lapse < until {
					until = lapse
				}
				continue
			}
		}
		if look == lookLater && i == 0 && len(bs) == 1 && b.sighted(p) {
			until = lapseUnread // read at the waiter's next look, if still there
			continue
		}
		raw, st, err := b.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return true, until, nil
		}
		if err != nil {
			return false, 0, err
		}
		d := decodeData(raw)
		b.noteLease(p, st.Mtime, d)
		lapse := st.Mtime + d.lease(c.seq == head)
		if i == 0 || c.kind == driver.Permit && lapse < until {
			until = lapse
		}
		if *now == 0 {
			if lapse > b.leaderNow() {
				continue // not yet, by our estimate of the leader's clock
			}
			// The estimate is only a hint: deleting another client's node
			// takes the leader's clock itself, as a write reads it.
			st, err := b.conn.Set(b.root+"/"+clockName, nil, -1)
			if err != nil {
				return false, 0, err
			}
			b.noteClock(st.Mtime)
			*now = st.Mtime
		}
		if lapse > *now {
			continue
		}
		switch err := b.conn.Delete(parent+"/"+c.name, st.Version); {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return true, until, nil
		case errors.Is(err, zk.ErrBadVersion): // renewed in time
		default:
			return false, 0, err
		}
	}
	return false, until, nil
}

// Release implements driver.Backend: it deletes the owner's node and, for
// a holding, records its token in the key's node (Inspect's last token),
// in one transaction.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("zklock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return err
	}
	_, err := run(ctx, serial(b, l.Owner, func() (struct{}, error) { return struct{}{}, b.release(l) }))
	return err
}

func (b *Backend) release(l driver.Lease) error {
	lk := l.ID()
	b.setRefused(lk, false)
	parent := b.linePath(l.Key)
	if e, ok := b.entry(lk); ok && e.reentry != "" {
		return b.releaseReentrant(l, parent, e)
	}
	n, err := b.locate(lk, parent)
	if err != nil {
		return err
	}
	if n == nil {
		return b.notHeld(l)
	}
	for {
		err := b.deleteNode(parent, n, -1)
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue // the last token moved: read it again
		case errors.Is(err, zk.ErrNoNode):
			b.forget(lk)
			return b.notHeld(l)
		case err != nil:
			// The delete may have been applied: the repeat finds the node
			// gone, and the receipt says that it was this release.
			if n.data.Held {
				b.receipt(l)
			}
			return err
		}
		b.forget(lk)
		if !n.data.Held { // a waiter left the line: it held nothing
			return driver.ErrNotHeld
		}
		b.receipt(l)
		return nil
	}
}

// receipt remembers that the owner released its holding, so that a
// repeat of the release reports success.
func (b *Backend) receipt(l driver.Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for r, at := range b.receipts {
		if now.Sub(at) > receiptTTL {
			delete(b.receipts, r)
		}
	}
	b.receipts[l.ID()] = now
}

// deleteNode deletes n if its version is version (-1: any); a holding's
// token becomes the key's last token unless a later one is there. A
// mutex's or a writer's holding is the key's only one while its node is
// there, and so the latest: its delete and the token's write go in one
// round trip. A reader or a permit may leave after a later holding: the
// last token is read first, and written only if not later.
func (b *Backend) deleteNode(parent string, n *node, version int32) error {
	if !n.data.Held {
		return b.conn.Delete(n.path, version)
	}
	kv := int32(-1)
	if c, _ := parseChild(path.Base(n.path)); c.kind == driver.Read || c.kind == driver.Permit {
		raw, st, err := b.conn.Get(keyNode(parent))
		if err != nil {
			return err
		}
		if last, _ := strconv.ParseUint(string(raw), 10, 64); last >= n.token {
			return b.conn.Delete(n.path, version)
		}
		kv = st.Version
	}
	res, err := b.conn.Multi(
		&zk.DeleteRequest{Path: n.path, Version: version},
		&zk.SetDataRequest{Path: keyNode(parent), Data: strconv.AppendUint(nil, n.token, 10), Version: kv},
	)
	for _, r := range res {
		if r.Error != nil && err == nil {
			err = r.Error
		}
	}
	for _, r := range res { // the node's absence says more than the version
		if errors.Is(r.Error, zk.ErrNoNode) {
			return r.Error
		}
	}
	return err
}

// notHeld answers a Release without a node: nil for a repeat of a recent
// release of this client's, else ErrNotHeld.
func (b *Backend) notHeld(l driver.Lease) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.receipts[l.ID()]; ok && time.Since(at) < receiptTTL {
		return nil
	}
	return driver.ErrNotHeld
}

// Refresh implements driver.Backend in one round trip: the owner's node
// is rewritten with the new lease length, which restarts its lease on the
// leader's clock.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("zklock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return 0, err
	}
	return run(ctx, serial(b, l.Owner, func() (time.Duration, error) {
		lk := l.ID()
		if e, ok := b.entry(lk); ok && e.reentry != "" {
			return b.refreshReentrant(lk, b.linePath(l.Key), e, ttl)
		}
		n, err := b.locate(lk, b.linePath(l.Key))
		if err != nil {
			return 0, err
		}
		if n == nil || !n.data.Held {
			return 0, driver.ErrNotHeld
		}
		n.data.Span = ms(ttl)
		n.wrote = time.Now()
		st, err := b.conn.Set(n.path, n.data.encode(), -1)
		if errors.Is(err, zk.ErrNoNode) {
			b.forget(lk)
			return 0, driver.ErrNotHeld
		}
		if err != nil {
			return 0, err
		}
		b.noteClock(st.Mtime)
		n.version = st.Version
		b.remember(lk, n)
		return b.validFor(ttl), nil
	}))
}

// Close implements driver.Backend: it stops the session monitor and the
// watches, and closes the connection if the backend opened it (from a
// URL). Locks held on a connection the caller gave [New] stay until their
// session or lease ends. Closing a connection of the backend's own ends
// its session, and ZooKeeper deletes the session's nodes at once: the
// locks held through it are gone, and their Lost channels close.
func (b *Backend) Close() error {
	if b == nil {
		return errNil
	}
	b.once.Do(func() {
		close(b.closed)
		b.mu.Lock()
		for lk, t := range b.lapses {
			t.Stop()
			delete(b.lapses, lk)
		}
		b.mu.Unlock()
		if b.ownsConn && b.conn != nil {
			b.mu.Lock()
			if b.sess != nil {
				close(b.sess.lost)
				b.sess = nil
			}
			b.mu.Unlock()
			b.conn.Close()
		}
	})
	return nil
}

// closedChan is a closed channel: the Lost of a lock whose session ended
// with the backend.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// lostChan returns the channel closed when the session that made or last
// renewed a node (the current one, just after that call) is gone.
func (b *Backend) lostChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ownsConn {
		select {
		case <-b.closed: // the session ended with Close
			return closedChan
		default:
		}
	}
	id := b.conn.SessionID()
	if b.sess != nil && b.sess.id == id {
		return b.sess.lost
	}
	if b.sess == nil {
		go b.monitor()
	} else {
		close(b.sess.lost)
	}
	b.sess = &session{id: id, lost: make(chan struct{})}
	return b.sess.lost
}

// monitor closes the current session's channel once the connection has
// another session (or none): the ensemble expired it, and deleted its nodes.
func (b *Backend) monitor() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.closed:
			return
		case <-t.C:
		}
		b.mu.Lock()
		if s := b.sess; s != nil && b.conn.SessionID() != s.id {
			close(s.lost)
			b.sess = &session{id: b.conn.SessionID(), lost: make(chan struct{})}
		}
		b.mu.Unlock()
	}
}
