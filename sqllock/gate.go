package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// MySQL and MariaDB have no notifications, but a session blocked in
// GET_LOCK wakes the moment the lock's holder lets go of it. A mutex's
// waiters use that: the holder of a contended key keeps the key's wake
// lock (wakeLockName) on a connection of its pool for as long as it holds
// the key, and lets go of it right after its release; each waiting
// backend blocks in GET_LOCK on the wake lock, on a connection of its own
// (its gate), and wakes its waiter that began first when it gets it. The
// gate keeps the wake lock for that waiter's attempt, which names the
// gate's connection, and for the holding that the attempt wins: the wake
// lock passes from holder to holder, and the others stay blocked in the
// server, one woken per release (MySQL grants a named lock to one session
// at a time). A release whose process has a gated watch of the key
// hands the wake lock to it in the process instead (handOver): the
// waiters of other processes stay blocked, and the server is asked only
// when the process has no waiter of the key left. While the process
// keeps the wake lock, its gated watches of the key wait in it (see
// keptHere), not in the server.
//
// For turnFor after a release, while a gate other than the one the
// attempt names has the wake lock, the key is kept for that gate's waiter:
// an attempt from elsewhere (the releasing backend's above all) is
// refused, so a contended mutex changes hands instead of going back to
// the worker that just released it. A gate that vanished frees the wake
// lock with its connection, and a stalled one holds the key up for
// turnFor at most.
//
// A waiter blocks at most the holder's remaining lease and gateWaitMax,
// then reads the key's row (the watch's poll); where nobody has the wake
// lock (the holder took the key without waiting, or ended), it polls as
// on any dialect without notifications. A holder that waited takes the
// wake lock when it acquires, if it can at once, so that the next
// handover is woken. Gates and kept wake locks are connections the pool
// lends for that long: a pool limited by SetMaxOpenConns lends at most
// half its connections less one to them, and a backend whose pool cannot
// spare one polls.
const gateWaitMax = time.Second

// wakeLockName is the named lock that a holder of key in table keeps for
// its waiters: "distlock-wake:" and 24 bytes of SHA-256 in hex, within
// MySQL's 64 characters. Named locks are server-wide, so the table is
// part of the name.
func wakeLockName(table, key string) string {
	sum := sha256.Sum256([]byte("distlock-wake:" + table + "\x00" + key))
	return "distlock-wake:" + hex.EncodeToString(sum[:24])
}

// wakeLockSQL is wakeLockName of the key $1, computed by the server.
const wakeLockSQL = `CONCAT('distlock-wake:', LEFT(SHA2(CONCAT('distlock-wake:{table}', X'00', $1), 256), 48))`

// gates is a backend's wake locks: the connections its waiters block on,
// and those that keep the wake locks of its holdings.
type gates struct {
	on bool // MySQL, the lease table's mode

	mu     sync.Mutex
	n      int         // connections out of the pool: gates, kept wake locks and spares
	spare  []*sql.Conn // gates to lend again, rather than the pool's churn
	closed bool
	held   map[driver.LeaseID]*keptGate
}

// spares is how many idle gates a backend keeps for its next waits.
const spares = 2

// keptGate is a holding's wake lock, on its connection, let go of at the
// release or when the lease ends unrenewed; or handed by the release to a
// waiter of the process (see handOver).
type keptGate struct {
	conn  *sql.Conn
	name  string
	id    int64     // the connection's CONNECTION_ID
	from  *gates    // the backend whose pool lent the connection
	hub   *localHub // the process's, which counts it; nil if unknown
	key   string
	timer *time.Timer
}

// newKept is the wake lock name of key, which c (whose CONNECTION_ID is
// id, lent by b's pool) has, kept in b's process.
func (b *Backend) newKept(c *sql.Conn, name string, id int64, key string) *keptGate {
	k := &keptGate{conn: c, name: name, id: id, from: &b.gates, hub: b.knownHub(), key: key}
	if k.hub != nil {
		k.hub.mu.Lock()
		k.hub.keepLocked(key)
		k.hub.mu.Unlock()
	}
	return k
}

// release lets go of k's wake lock and gives its connection back.
func (k *keptGate) release() {
	k.from.put(k.conn, k.name, true)
	if k.hub != nil {
		k.hub.mu.Lock()
		k.hub.unkeepLocked(k.key)
		k.hub.mu.Unlock()
	}
}

// keptHere counts the wake locks of a key that this process keeps, for
// its holdings or handed to its waiters; ch is closed when the last one
// is let go of. While one is kept, the gated watches of the key wait in
// the process, for a release here hands the wake lock to one of them:
// blocked in the server, a watch whose waiter won the key that way would
// tie up its connection until its wait's bound.
type keptHere struct {
	n  int
	ch chan struct{}
}

func (h *localHub) keepLocked(key string) {
	if h.kept == nil {
		h.kept = make(map[string]*keptHere)
	}
	k := h.kept[key]
	if k == nil {
		k = &keptHere{ch: make(chan struct{})}
		h.kept[key] = k
	}
	k.n++
}

func (h *localHub) unkeepLocked(key string) {
	if k := h.kept[key]; k != nil {
		if k.n--; k.n == 0 {
			close(k.ch)
			delete(h.kept, key)
		}
	}
}

// keptLocked returns a channel closed when this process keeps the wake
// lock of key no longer, or nil if it keeps none.
func (h *localHub) keptLocked(key string) <-chan struct{} {
	if k := h.kept[key]; k != nil {
		return k.ch
	}
	return nil
}

func (b *Backend) prepareGates() {
	b.gates.on = b.dialect == MySQL && b.conns == nil
}

// Statements on a gate carry their arguments as literals, so that the
// driver sends each as one request instead of preparing, running and
// closing it. The wake lock's name is hex; the key goes as a hex literal.

// waitQuery is the gate's wait on the wake lock name of key. It answers
// -1 if nobody has the wake lock; 2 if the key is free (its lease ended,
// or it was released and is kept no longer) while someone has it still;
// otherwise 1 when it got the wake lock, 0 when it timed out, at the end
// of the holder's lease (or of the key's keeping for another waiter), or
// after gateWaitMax. And the gate's CONNECTION_ID.
func (b *Backend) waitQuery(name, key string) string {
	return prepare(b.d, b.table, `SELECT CASE WHEN IS_USED_LOCK('`+name+`') IS NULL THEN -1 WHEN x.left_us <= 0 THEN 2
		ELSE GET_LOCK('`+name+`', LEAST(`+strconv.FormatFloat(gateWaitMax.Seconds(), 'f', -1, 64)+`, x.left_us / 1000000)) END, CONNECTION_ID()
	FROM (SELECT COALESCE((SELECT IF(owners = '', expires_us + `+b.turn+`, expires_us) - {now} FROM {table} WHERE name = X'`+hex.EncodeToString([]byte(key))+`'), 0) AS left_us) x`).query
}

func letGoQuery(name string) string { return `DO RELEASE_LOCK('` + name + `')` }

// conn lends a connection of the pool to a gate, unless the pool cannot
// spare one.
func (g *gates) conn(ctx context.Context, db *sql.DB) *sql.Conn {
	g.mu.Lock()
	if n := len(g.spare); n > 0 {
		c := g.spare[n-1]
		g.spare = g.spare[:n-1]
		g.mu.Unlock()
		return c
	}
	limit := db.Stats().MaxOpenConnections
	if g.closed || limit > 0 && 2*(g.n+1) > limit-1 {
		g.mu.Unlock()
		return nil
	}
	g.n++
	g.mu.Unlock()
	c, err := db.Conn(ctx)
	if err != nil {
		g.mu.Lock()
		g.n--
		g.mu.Unlock()
		return nil
	}
	return c
}

// put keeps c as a spare gate, or gives it back to the pool, after
// letting go of the wake lock name if it has it; a connection that may
// still have it is closed instead.
func (g *gates) put(c *sql.Conn, name string, has bool) {
	bad := false
	if has {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.ExecContext(ctx, letGoQuery(name))
		cancel()
		bad = err != nil
	}
	g.mu.Lock()
	if !bad && !g.closed && len(g.spare) < spares {
		g.spare = append(g.spare, c)
		g.mu.Unlock()
		return
	}
	g.n--
	g.mu.Unlock()
	if bad {
		_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	_ = c.Close()
}

// keep makes k the wake lock of the holding id for ttl.
func (b *Backend) keep(id driver.LeaseID, k *keptGate, ttl time.Duration) {
	g := &b.gates
	g.mu.Lock()
	if old := g.held[id]; old != nil {
		// A repeated grant of the same holding: one wake lock is enough.
		g.mu.Unlock()
		k.release()
		return
	}
	if g.held == nil {
		g.held = make(map[driver.LeaseID]*keptGate)
	}
	g.held[id] = k
	k.timer = time.AfterFunc(ttl, func() { b.letGo(id, k) })
	g.mu.Unlock()
}

// letGo lets go of the wake lock of the holding id, if k keeps it: the
// lease ended unrenewed.
func (b *Backend) letGo(id driver.LeaseID, k *keptGate) {
	if k = b.unkeep(id, k); k != nil {
		k.release()
	}
}

// unkeep takes the wake lock of the holding id out of b's keeping, if k
// (any, if nil) keeps it, and returns it.
func (b *Backend) unkeep(id driver.LeaseID, k *keptGate) *keptGate {
	g := &b.gates
	g.mu.Lock()
	cur := g.held[id]
	if cur == nil || (k != nil && cur != k) {
		g.mu.Unlock()
		return nil
	}
	delete(g.held, id)
	g.mu.Unlock()
	cur.timer.Stop()
	return cur
}

// passWake passes on the wake lock of the holding id, which was released:
// to the waiter of the key in this process that began first, if there is
// one (handOver), else to the server, which wakes one waiting backend in
// any process. It reports whether the holding kept one.
func (b *Backend) passWake(id driver.LeaseID) bool {
	k := b.unkeep(id, nil)
	if k == nil {
		return false
	}
	if !b.handOver(id.Key, k) {
		k.release()
	}
	return true
}

// handOver gives k, the wake lock of a released holding of key, to the
// gated watch of key in this process that began first and has no wake
// lock, and wakes it: the wake lock stays on its connection, so the
// waiters of other processes sleep on, and the woken waiter's attempt
// names it as its gate, keeping it for the holding it wins. A waiter
// that makes no attempt within maxPoll lets go of it. handOver reports
// whether it found a watch.
func (b *Backend) handOver(key string, k *keptGate) bool {
	h := b.knownHub()
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var oldest *localWatch
	for w := range h.watches[key] {
		if !w.gated || oldest != nil && w.seq > oldest.seq {
			continue
		}
		w.mu.Lock()
		free := !w.closed && w.given == nil && w.baton == nil
		w.mu.Unlock()
		if free {
			oldest = w
		}
	}
	if oldest == nil {
		return false
	}
	w := oldest
	w.mu.Lock()
	w.given = k
	k.timer = time.AfterFunc(maxPoll, func() {
		if k := w.takeGiven(k); k != nil {
			k.release()
		}
	})
	w.mu.Unlock()
	w.wake()
	return true
}

// takeGiven takes from w the wake lock handed to it, if k (any, if nil)
// is that one and no attempt has it.
func (w *localWatch) takeGiven(k *keptGate) *keptGate {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.given
	if cur == nil || (k != nil && cur != k) || w.lentGiven {
		return nil
	}
	w.given = nil
	cur.timer.Stop()
	return cur
}

// renewed keeps the wake lock of the holding id for ttl more.
func (b *Backend) renewed(id driver.LeaseID, ttl time.Duration) {
	g := &b.gates
	g.mu.Lock()
	if k := g.held[id]; k != nil {
		k.timer.Reset(ttl)
	}
	g.mu.Unlock()
}

// baton finds a watch of key in b whose gate has the wake lock, and lends
// it to one attempt, which names the gate's connection ($8 of the
// statement): nil if none has.
func (b *Backend) baton(key string) (*localWatch, int64) {
	if !b.gates.on {
		return nil, 0
	}
	h := b.knownHub()
	if h == nil {
		return nil, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[key] {
		if w.b != b || !w.gated {
			continue
		}
		w.mu.Lock()
		if w.given != nil && !w.lentGiven {
			// A release of this process handed it the wake lock.
			w.lentGiven = true
			w.given.timer.Stop()
			id := w.given.id
			w.mu.Unlock()
			return w, id
		}
		if w.baton != nil && !w.lent {
			w.lent = true
			id := w.id
			w.mu.Unlock()
			return w, id
		}
		w.mu.Unlock()
	}
	return nil, 0
}

// waited reports whether b has a watch of key: its holder waited, and
// may have been followed by waiters.
func (b *Backend) waited(key string) bool {
	h := b.knownHub()
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[key] {
		if w.b == b && w.gated {
			return true
		}
	}
	return false
}

// settle ends the attempt that w's gate was lent to: a granted one keeps
// the wake lock for the holding id, a refused one gives it back to w,
// which lets go of it.
func (b *Backend) settle(w *localWatch, granted bool, id driver.LeaseID, ttl time.Duration) {
	w.mu.Lock()
	if w.lentGiven {
		k := w.given
		w.given, w.lentGiven = nil, false
		w.mu.Unlock()
		if granted {
			b.keep(id, k, ttl)
		} else {
			k.release()
		}
		return
	}
	c, done := w.conn, w.baton
	w.lent, w.baton = false, nil
	if granted {
		w.conn, w.refused = nil, false // the holding's now
	}
	w.mu.Unlock()
	if granted {
		b.keep(id, w.b.newKept(c, w.name, w.id, w.key), ttl)
	}
	close(done)
}

// takeWake takes the wake lock of a key that b was granted after waiting,
// if nobody has it, so that the key's next release wakes its waiters.
func (b *Backend) takeWake(ctx context.Context, id driver.LeaseID, ttl time.Duration) {
	c := b.gates.conn(ctx, b.db)
	if c == nil {
		return
	}
	name := wakeLockName(b.table, id.Key)
	var got, conn sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT GET_LOCK('`+name+`', 0), CONNECTION_ID()`).Scan(&got, &conn); err != nil || got.Int64 != 1 {
		b.gates.put(c, name, err != nil)
		return
	}
	b.keep(id, b.newKept(c, name, conn.Int64, id.Key), ttl)
}

// gateLoop is a gated watch's wait: blocked in GET_LOCK on the key's wake
// lock while a holder has it, polling the key's row otherwise. quit ends
// it (the watch was closed), but not a wait in flight: a session whose
// client leaves it blocked in GET_LOCK stays in the lock's queue until
// its timeout, and could be granted the wake lock there, keeping the key
// from every waiter for turnFor. The wait ends within gateWaitMax.
func (w *localWatch) gateLoop(quit context.Context) {
	b := w.b
	defer func() {
		w.mu.Lock()
		c, has := w.conn, w.refused
		w.conn, w.refused = nil, false
		w.mu.Unlock()
		if c != nil {
			b.gates.put(c, w.name, has)
		}
	}()
	poll, wait := b.pollFirst, ""
	var next time.Duration // the holder's remaining lease, as the last poll saw it
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-quit.Done():
			return false
		}
	}
	for quit.Err() == nil {
		w.h.mu.Lock()
		here := w.h.keptLocked(w.key)
		w.h.mu.Unlock()
		if here != nil {
			// A holding of this process keeps the wake lock: its release
			// hands it to a waiter here (handOver).
			select {
			case <-here:
				continue
			case <-quit.Done():
				return
			}
		}
		w.mu.Lock()
		c := w.conn
		w.mu.Unlock()
		if c == nil {
			if c = b.gates.conn(quit, b.db); c != nil {
				w.mu.Lock()
				w.conn = c
				w.mu.Unlock()
			}
		}
		got := int64(-1)
		if c != nil {
			if wait == "" {
				wait = b.waitQuery(w.name, w.key)
			}
			var (
				r  sql.NullInt64
				id int64
			)
			ctx, cancel := context.WithTimeout(context.Background(), gateWaitMax+10*time.Second)
			err := c.QueryRowContext(ctx, wait).Scan(&r, &id)
			cancel()
			switch {
			case err != nil:
				// The connection is lost: a new one, next time.
				w.mu.Lock()
				w.conn = nil
				w.mu.Unlock()
				_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
				b.gates.put(c, w.name, false)
				if !sleep(poll) {
					return
				}
				continue
			case r.Valid:
				got = r.Int64
				w.mu.Lock()
				w.id = id
				w.refused = got == 1 // to let go of, unless an attempt takes it
				w.mu.Unlock()
			}
		}
		if quit.Err() != nil {
			return
		}
		switch got {
		case 0:
			continue // the wait's bound: the row tells what next
		case 1:
			// The holder let go of the wake lock: its release, or its end.
			if !w.passed(quit) {
				// The attempt won the key, which keeps the wake lock now:
				// the watch polls, as on any dialect, until it is closed.
				w.mu.Lock()
				if !w.closed {
					w.timer = time.AfterFunc(w.poll, w.tick)
				}
				w.mu.Unlock()
				return
			}
			poll = b.pollFirst
			continue
		case 2:
			// Free, but a holder that ended unreleased, or a waiter woken
			// before, has the wake lock: the attempt decides.
			w.wake()
			if !sleep(poll) {
				return
			}
		default:
			// Nobody has the wake lock: the holder took the key without
			// waiting. Poll the row, as on any dialect.
			d := poll/2 + rand.N(poll/2+1)
			if next > 0 && next < d {
				d = next
			}
			if !sleep(d) {
				return
			}
			next = w.check()
		}
		poll = min(2*poll, b.pollCap)
	}
}

// passed wakes w's waiter for an attempt with the wake lock that w's gate
// got, and waits until an attempt settles it, or none came within
// pollCap. It lets go of the wake lock unless the attempt was granted,
// and reports whether w keeps its gate.
func (w *localWatch) passed(quit context.Context) bool {
	done := make(chan struct{})
	w.mu.Lock()
	w.baton = done
	w.mu.Unlock()
	w.wake()
	t := time.NewTimer(w.b.pollCap)
	select {
	case <-done:
	case <-t.C:
	case <-quit.Done():
	}
	t.Stop()
	w.mu.Lock()
	if w.baton == done && !w.lent {
		w.baton = nil // no attempt came
	}
	lent := w.lent
	w.mu.Unlock()
	if lent {
		<-done // the attempt settles it
	}
	w.mu.Lock()
	c, has := w.conn, w.refused
	w.refused = false
	w.mu.Unlock()
	if c == nil {
		return false
	}
	if has {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.ExecContext(ctx, letGoQuery(w.name))
		cancel()
		if err != nil {
			w.mu.Lock()
			w.conn = nil
			w.mu.Unlock()
			_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
			w.b.gates.put(c, w.name, false)
		}
	}
	return true
}

// close lets go of the wake locks of b's holdings: their waiters poll.
func (g *gates) close() {
	g.mu.Lock()
	held := g.held
	g.held = nil
	g.mu.Unlock()
	for _, k := range held {
		k.timer.Stop()
		k.release()
	}
	g.mu.Lock()
	g.closed = true
	spare := g.spare
	g.spare = nil
	g.n -= len(spare)
	g.mu.Unlock()
	for _, c := range spare {
		_ = c.Close()
	}
}

// knownHub is b's hub, if known yet.
func (b *Backend) knownHub() *localHub {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.local
}
