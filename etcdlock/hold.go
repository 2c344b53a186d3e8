package etcdlock

import (
	"context"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// A lease is shared by every key of the backend with the same TTL in
// seconds, and kept alive as long as the backend runs; it ends the keys
// of a backend that stopped (a crashed or partitioned process). A key
// must also end when its own holder stops renewing it: the backend keeps
// a deadline per key (the TTL of the holding, or the Queue of a waiter's
// place, from the start of the attempt or renewal that set it) and
// deletes the key when it passes.
//
// The deadline is armed before an attempt sends anything: a key whose
// reply was lost, and that nobody asks for again or releases, ends at its
// TTL like any other, not with the lease.
//
// The deadline of a holding also knows the lease its key is on, which a
// Refresh with a TTL of other whole seconds changes, and the holding's
// Grant.Lost channel: it closes when that lease ends (or, after a move
// whose outcome is unknown, any lease the key may be on).

// deadline is the local end of one key of this backend.
type deadline struct {
	rev   int64 // the key's create revision; 0 until a reply tells it
	at    time.Time
	timer *time.Timer
	// on, for a holding, lists the leases its key may be on: one, or
	// more after moves of unknown outcome; the last is the one moved to.
	// Empty for a waiter's place.
	on   []*lease
	lost chan struct{} // a holding's Grant.Lost

	// index is the key's owner's name in Backend.names; val is the
	// value the owner's attempts put, which tells the owner's key from an
	// earlier one of the same name.
	index, val string

	// holds, for the deadline of a re-entrant identity (keyed by its
	// anchor, see reentry.go), lists the hold keys this backend put or
	// may have put; nil for any other key.
	holds map[string]bool

	// place, for a waiter's place, is the lease its key was put on (nil:
	// unknown). turn is the key's create revision once a watch saw every
	// key ahead of it in line deleted and the key still there: from then
	// on the key holds the lock (see watch.go). 0 otherwise.
	place *lease
	turn  int64
	// behind is the key's create revision while a watch's read of the
	// line, made since the owner's last request, saw keys ahead of it
	// (see Backend.behind); 0 otherwise.
	behind int64

	// lapsing, while the key is being deleted, is closed once it is:
	// a new attempt of the owner waits, so that the deletion cannot
	// take a key that attempt puts or confirms.
	lapsing chan struct{}
}

// arm names the owner's key and makes it end at at, or later if its
// deadline is later, before an attempt that may put it is sent. If the
// key is being deleted for a passed deadline, it waits until it is.
//
// An owner the backend keeps a key for (a repeat, a waiter's next
// attempt) gets that key's name and value back. Any other gets the first
// of the backend's names in k's line (k.sub, then the backend's id and a
// slot number) that no key of the backend has now, and a value naming
// the owner: the name is reused once its key is gone, so that a lock's
// line does not gain a new deleted key (which etcd keeps until it
// compacts) per acquisition. The name is the backend's alone as long as
// its deadline is kept, so no other owner's attempt puts it meanwhile.
func (b *Backend) arm(ctx context.Context, req driver.Request, k keys, at time.Time) (keys, error) {
	index := ownerIndex(k.lock, req.Kind, req.Owner)
	var d *deadline
	for d == nil {
		b.mu.Lock()
		name, ok := b.names[index]
		if !ok {
			val, err := holdingValue(req)
			if err != nil {
				b.mu.Unlock()
				return keys{}, err
			}
			name = b.freeNameLocked(k.sub)
			d = b.newDeadline(name, 0, at)
			d.index, d.val = index, val
			if b.names == nil {
				b.names = make(map[string]string)
			}
			b.names[index] = name
			break
		}
		d = b.deadlines[name]
		if d == nil {
			delete(b.names, index) // not kept: a name to find anew
			b.mu.Unlock()
			continue
		}
		if d.lapsing != nil {
			wait := d.lapsing
			d = nil
			b.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return keys{}, ctx.Err()
			}
			continue
		}
		if at.After(d.at) {
			d.at = at
			d.timer.Reset(time.Until(at))
		}
	}
	k.own, k.val = b.names[index], d.val
	b.mu.Unlock()
	return k, nil
}

// ownerIndex is the name under which Backend.names records the key of
// the owner's holding or place in line of kind in lock (a lock's prefix).
// A permit's is the same for every semaphore size: Release and Refresh
// are not told the size.
func ownerIndex(lock string, kind driver.Kind, owner string) string {
	return lock + subprefix(kind, 0)[:1] + "\x00" + owner
}

// freeNameLocked returns the first name in sub of the backend's that no
// key the backend keeps has; b.mu must be held.
func (b *Backend) freeNameLocked(sub string) string {
	for n := 0; ; n++ {
		if name := sub + b.id + strconv.Itoa(n); b.deadlines[name] == nil {
			return name
		}
	}
}

// named returns k with the name and value of the owner's key of kind,
// if the backend keeps one; k unchanged otherwise.
func (b *Backend) named(k keys, kind driver.Kind, owner string) (keys, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name, ok := b.names[ownerIndex(k.lock, kind, owner)]
	d := b.deadlines[name]
	if !ok || d == nil {
		return k, false
	}
	k.own, k.val = name, d.val
	return k, true
}

// dropLocked drops the deadline of key, and its owner's record of the
// name; b.mu must be held.
func (b *Backend) dropLocked(key string) {
	if d := b.deadlines[key]; d != nil && d.index != "" && b.names[d.index] == key {
		delete(b.names, d.index)
	}
	delete(b.deadlines, key)
}

// revision returns the create revision of key as the backend knows it
// (0: unknown).
func (b *Backend) revision(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil {
		return d.rev
	}
	return 0
}

// whenSettled runs f, with b.mu held, on key's deadline (nil if it has
// none) once the key is not being deleted for a passed deadline, waiting
// until such a deletion is done. If ctx ends first, f does not run.
func (b *Backend) whenSettled(ctx context.Context, key string, f func(d *deadline)) error {
	for {
		wait := b.settled(key, f)
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// settled runs f, with b.mu held, on key's deadline (nil if it
// has none) if the key is not being deleted for a passed deadline; else
// it returns the channel closed once it is.
func (b *Backend) settled(key string, f func(d *deadline)) (lapsing <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d != nil && d.lapsing != nil {
		return d.lapsing
	}
	f(d)
	return nil
}

// setDeadline makes the key, created at rev, end at at (unless it is
// extended first), as a reply told. l is the lease of a holding, nil for
// a waiter's place; for a holding, it returns the channel that closes when
// l ends. A key being deleted for a passed deadline is left to it: the
// grant the reply brings is already past its validity.
func (b *Backend) setDeadline(key string, rev int64, at time.Time, l *lease) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	switch {
	case d != nil && d.lapsing != nil:
		return d.lost
	case d != nil && (d.rev == rev || d.rev == 0):
		d.rev, d.at = rev, at
		d.timer.Reset(time.Until(at))
	default:
		var index, val string
		if d != nil {
			d.timer.Stop()
			index, val = d.index, d.val
		}
		d = b.newDeadline(key, rev, at)
		d.index, d.val = index, val
	}
	if l == nil {
		return nil
	}
	d.place, d.turn, d.behind = nil, 0, 0
	if d.lost == nil || closed(d.lost) || len(d.on) != 1 || d.on[0] != l {
		d.on, d.lost = []*lease{l}, make(chan struct{})
		if l.gone() {
			close(d.lost)
		}
	}
	return d.lost
}

// newDeadline adds a deadline; b.mu must be held.
func (b *Backend) newDeadline(key string, rev int64, at time.Time) *deadline {
	if b.deadlines == nil {
		b.deadlines = make(map[string]*deadline)
	}
	d := &deadline{rev: rev, at: at}
	d.timer = time.AfterFunc(time.Until(at), func() { b.lapse(key, d) })
	b.deadlines[key] = d
	return d
}

// leaseEnded ends the holdings on l: l is gone.
func (b *Backend) leaseEnded(l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.deadlines {
		if d.lost != nil && slices.Contains(d.on, l) && !closed(d.lost) {
			close(d.lost)
		}
	}
}

// moving notes that the holding of key is being moved to lease to: until
// moved or unmoved says where it is, the end of any lease it may be on
// ends it.
func (b *Backend) moving(key string, to *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lost == nil || slices.Contains(d.on, to) {
		return
	}
	d.on = append(d.on, to)
	if to.gone() && !closed(d.lost) {
		close(d.lost)
	}
}

// unmoved notes that a move of the holding of key to lease to was not
// applied.
func (b *Backend) unmoved(key string, to *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && len(d.on) > 1 && d.on[len(d.on)-1] == to {
		d.on = d.on[:len(d.on)-1]
	}
}

// moved notes that the holding of key is on lease l alone.
func (b *Backend) moved(key string, l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.lost != nil && slices.Contains(d.on, l) {
		d.on = []*lease{l}
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// holding returns the lease of the owner's holding of key, nil if the
// backend keeps none: released, ended (its lease or its deadline), or only
// a waiter's place.
func (b *Backend) holding(key string) *lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lost == nil || closed(d.lost) {
		return nil // a deletion for a passed deadline closes lost first
	}
	return d.on[len(d.on)-1]
}

// extendDeadline moves the deadline of a holding's key to at, if that is
// later. It reports false if the backend no longer keeps the holding.
func (b *Backend) extendDeadline(key string, at time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || len(d.on) == 0 {
		return false
	}
	if at.After(d.at) {
		d.at = at
		d.timer.Reset(time.Until(at))
	}
	return true
}

// setAt moves the deadline of a holding's key to at, earlier or later,
// after a renewal for at succeeded. Until then the deadline stays the
// later of the two (extendDeadline): a renewal of unknown outcome must not
// end the key before the holder's earlier grant does.
func (b *Backend) setAt(key string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.lapsing == nil && len(d.on) > 0 {
		d.at = at
		d.timer.Reset(time.Until(at))
	}
}

// forget drops the deadline of key: it was released, or is known not to
// exist. A deletion under way finishes.
func (b *Backend) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.lapsing == nil {
		d.timer.Stop()
		b.dropLocked(key)
	}
}

// vanished notes that the key, created at rev, is gone, as an attempt of
// its owner found: the holding it was, if any, is lost (Grant.Lost), and
// the deadline, armed for the attempt, names no revision any more, so
// that it ends whatever key the owner puts next.
func (b *Backend) vanished(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || (d.rev != rev && d.rev != 0) {
		return
	}
	if d.lost != nil && !closed(d.lost) {
		close(d.lost)
	}
	d.rev, d.on, d.lost, d.place, d.turn, d.behind = 0, nil, nil, nil, 0, 0
}

// placed notes that the waiter's place key, created at rev, is on lease
// l, as the attempt that put or found it was told.
func (b *Backend) placed(key string, rev int64, l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.lost == nil {
		d.place = l
	}
}

// sawTurn notes that the waiter's place key, created at rev, holds the
// lock: a watch saw every key ahead of it deleted, and not the key.
func (b *Backend) sawTurn(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.lapsing == nil && d.lost == nil {
		d.turn, d.behind = rev, 0
	}
}

// lostTurn notes that the waiter's place key, created at rev, was
// deleted, as its watch saw.
func (b *Backend) lostTurn(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev {
		d.place, d.turn, d.behind = nil, 0, 0
	}
}

// sawBehind notes that a watch read the line after the owner's last
// request and saw keys ahead of the place key created at rev.
func (b *Backend) sawBehind(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.lapsing == nil && d.lost == nil {
		d.behind = rev
	}
}

// behind reports, once per read of its watch, that the owner's place key
// has keys ahead of it, as that read saw since the owner's last request:
// an attempt then is refused without asking etcd again. The next attempt
// asks, unless the watch read the line again meanwhile. It returns the
// key's create revision, or 0.
func (b *Backend) behind(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || d.lost != nil || d.behind == 0 || d.behind != d.rev {
		return 0
	}
	d.behind = 0
	return d.rev
}

// held returns the create revision of the owner's key if the backend
// keeps it as a holding, granted and not lost; 0 otherwise.
func (b *Backend) held(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || d.lost == nil || closed(d.lost) {
		return 0
	}
	return d.rev
}

// inLine returns the create revision and the lease of the owner's place
// key, if the backend knows it waits in line; 0 and nil otherwise.
func (b *Backend) inLine(key string) (int64, *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || d.lost != nil || d.rev == 0 || d.place == nil {
		return 0, nil
	}
	return d.rev, d.place
}

// turn returns the waiter's place key's create revision and lease if a
// watch saw its turn come; 0 and nil otherwise.
func (b *Backend) turn(key string) (int64, *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || d.lapsing != nil || d.lost != nil || d.turn == 0 || d.turn != d.rev || d.place == nil {
		return 0, nil
	}
	return d.turn, d.place
}

// lapse runs on d's timer: the key is deleted if d has passed. A key
// whose create revision is unknown (its attempt's reply was lost) is
// deleted whatever its revision if it has the owner's value: no attempt
// of the owner runs meanwhile.
func (b *Backend) lapse(key string, d *deadline) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadlines[key] != d || d.lapsing != nil {
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		return
	}
	d.lapsing = make(chan struct{})
	if d.lost != nil && !closed(d.lost) {
		close(d.lost) // the holding ends with its key
	}
	if d.holds != nil {
		b.lapseIdentity(key, d)
		return
	}
	done := func() {
		b.mu.Lock()
		if b.deadlines[key] == d {
			b.dropLocked(key)
		}
		close(d.lapsing)
		b.mu.Unlock()
	}
	rev, val := d.rev, d.val
	started := b.goLocked(func() {
		defer done()
		// Retried for a while; a cluster out of reach that long has
		// stopped the keep-alive too, and the lease ends the key.
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			txn := b.cli.Txn(ctx)
			switch {
			case rev != 0:
				txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
			case val != "":
				txn = txn.If(clientv3.Compare(clientv3.Value(key), "=", val))
			}
			if _, err := txn.Then(clientv3.OpDelete(key)).Commit(); err == nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	if !started { // closed: the lease, no longer kept alive, ends the key
		b.dropLocked(key)
		close(d.lapsing)
	}
}

// goLocked runs f in a goroutine that Close waits for, unless the backend
// is closed; b.mu must be held. It reports whether f runs.
func (b *Backend) goLocked(f func()) bool {
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// goTracked is goLocked for a caller that does not hold b.mu.
func (b *Backend) goTracked(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.goLocked(f)
}
