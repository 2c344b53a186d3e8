package etcdlock

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/distlock-go/distlock/driver"
)

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
	for {
		named, lapsing, err := b.armOnce(req, k, index, at)
		if err != nil || lapsing == nil {
			return named, err
		}
		select {
		case <-lapsing:
		case <-ctx.Done():
			return keys{}, ctx.Err()
		}
	}
}

// armOnce is arm's work under b.mu: it returns k named, or, if the
// owner's key is being deleted for a passed deadline, the channel that
// closes once it is.
func (b *Backend) armOnce(req driver.Request, k keys, index string, at time.Time) (keys, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name, ok := b.names[index]
	d := b.deadlines[name]
	switch {
	case !ok || d == nil: // none kept: a name to find anew
		val, err := holdingValue(req)
		if err != nil {
			return keys{}, nil, err
		}
		name = b.freeNameLocked(k.sub)
		d = b.newDeadlineLocked(name, 0, at)
		d.index, d.val = index, val
		if b.names == nil {
			b.names = make(map[string]string)
		}
		b.names[index] = name
	case d.phaseLocked() == phaseLapsing:
		return keys{}, d.lapsing, nil
	default:
		d.extendLocked(at)
	}
	k.own, k.val = name, d.val
	return k, nil, nil
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

// whenSettled runs fLocked, with b.mu held, on key's deadline (nil if it
// has none) once the key is not being deleted for a passed deadline,
// waiting until such a deletion is done. If ctx ends first, fLocked does
// not run.
func (b *Backend) whenSettled(ctx context.Context, key string, fLocked func(d *deadline)) error {
	for {
		wait := b.settled(key, fLocked)
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

// settled runs fLocked, with b.mu held, on key's deadline (nil if it has
// none) if the key is not being deleted for a passed deadline; else it
// returns the channel closed once it is.
func (b *Backend) settled(key string, fLocked func(d *deadline)) (lapsing <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d != nil && d.phaseLocked() == phaseLapsing {
		return d.lapsing
	}
	fLocked(d)
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
	case d != nil && d.phaseLocked() == phaseLapsing:
		return d.lost
	case d != nil && (d.rev == rev || d.rev == 0):
		d.rev = rev
		d.setLocked(at)
	default: // another key under the name: a deadline of its own
		var index, val string
		if d != nil {
			d.timer.Stop()
			index, val = d.index, d.val
		}
		d = b.newDeadlineLocked(key, rev, at)
		d.index, d.val = index, val
	}
	if l == nil {
		return nil
	}
	return d.holdLocked(l)
}

// leaseEnded ends the holdings on l: l is gone.
func (b *Backend) leaseEnded(l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.deadlines {
		if slices.Contains(d.on, l) {
			d.endLocked()
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
	if d == nil || !d.grantedLocked() || slices.Contains(d.on, to) {
		return
	}
	d.on = append(d.on, to)
	if to.gone() {
		d.endLocked()
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
	if d := b.deadlines[key]; d != nil && d.grantedLocked() && slices.Contains(d.on, l) {
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
	if d == nil || d.phaseLocked() != phaseHolding {
		return nil // a deletion for a passed deadline ends the holding first
	}
	return d.on[len(d.on)-1]
}

// extendDeadline moves the deadline of a holding's key to at, if that is
// later. It reports false if the backend no longer keeps the holding.
func (b *Backend) extendDeadline(key string, at time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[key]
	if d == nil || !d.grantedLocked() {
		return false
	}
	d.extendLocked(at)
	return true
}

// setAt moves the deadline of a holding's key to at, earlier or later,
// after a renewal for at succeeded. Until then the deadline stays the
// later of the two (extendDeadline): a renewal of unknown outcome must not
// end the key before the holder's earlier grant does.
func (b *Backend) setAt(key string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.grantedLocked() {
		d.setLocked(at)
	}
}

// forget drops the deadline of key: it was released, or is known not to
// exist. A deletion under way finishes.
func (b *Backend) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.phaseLocked() != phaseLapsing {
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
	if d == nil || d.phaseLocked() == phaseLapsing || (d.rev != rev && d.rev != 0) {
		return
	}
	d.vanishLocked()
}

// placed notes that the waiter's place key, created at rev, is on lease
// l, as the attempt that put or found it was told.
func (b *Backend) placed(key string, rev int64, l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.waitingLocked() {
		d.place = l
	}
}

// sawTurn notes that the waiter's place key, created at rev, holds the
// lock: a watch saw every key ahead of it deleted, and not the key.
func (b *Backend) sawTurn(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.waitingLocked() {
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
	if d := b.deadlines[key]; d != nil && d.rev == rev && d.waitingLocked() {
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
	if d == nil || !d.waitingLocked() || d.behind == 0 || d.behind != d.rev {
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
	if d == nil || d.phaseLocked() != phaseHolding {
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
	if d == nil || d.phaseLocked() != phaseInLine || d.place == nil {
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
	if d == nil || d.phaseLocked() != phaseInLine || d.turn == 0 || d.turn != d.rev || d.place == nil {
		return 0, nil
	}
	return d.turn, d.place
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
