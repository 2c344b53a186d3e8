package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
//
// # The life of a deadline
//
// A deadline is in one of the phases below (the constants phaseArmed,
// phaseInLine, ..., see [deadline.phaseLocked]), which it goes through by
// the transitions in this file, each run with b.mu held. The Backend's
// methods in hold.go (an owner's key) and reentry.go (a re-entrant
// identity, keyed by its anchor) take b.mu and make them.
//
//	(none) ──arm──▶ armed ──place──▶ inLine
//	                  │                 │
//	                 hold              hold
//	                  ▼                 │
//	                holding ◀───────────┘
//	                  │  ▲
//	                 end hold (on a new lease)
//	                  ▼  │
//	                 ended
//
//	vanish:  inLine, holding, ended ──▶ armed
//	drop:    every phase but lapsing ──▶ (none)
//	lapse:   every phase, once its time passed ──▶ lapsing ──the key deleted──▶ (none)
//
// arm (Backend.arm, newDeadlineLocked) names the owner's key and sets its
// time before an attempt is sent; place (setDeadline without a lease)
// notes the revision of a waiter's place that a reply told; hold
// (holdLocked) ties the key to the lease of a grant and opens its
// Grant.Lost; end (endLocked) closes Grant.Lost: the lease ended, the key
// moved to a lease that ended, its time passed; vanish (vanishLocked)
// forgets a key an attempt found gone, so that the deadline ends whatever
// key the owner puts next; drop (dropLocked, by forget and dropHold)
// forgets the key, released or known not to exist; lapse deletes it. In
// every phase but lapsing the time moves: only later (extendLocked) before
// an attempt or while a renewal's outcome is unknown, to what a reply
// told (setLocked) once it is known.
//
// An identity's deadline is holding from the moment the backend keeps its
// lease alive (see Backend.keep), before a reply tells the anchor's
// revision (rev 0 until then) or the anchor is first in line.
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

// phase is where a deadline is in its life (see deadline).
type phase uint8

const (
	// phaseArmed: an attempt may have put the key, and no reply told its
	// revision (rev 0).
	phaseArmed phase = iota
	// phaseInLine: the key, created at rev, is a waiter's place.
	phaseInLine
	// phaseHolding: the key holds, on the leases in on; Grant.Lost is open.
	phaseHolding
	// phaseEnded: the holding ended (its lease did, or the key moved to one
	// that did); Grant.Lost is closed. The deadline stays until the
	// owner releases or asks again, or its time passes.
	phaseEnded
	// phaseLapsing: the time passed and the key is being deleted; lapsing
	// closes once it is, and the deadline goes.
	phaseLapsing
)

// phaseLocked tells where d is in its life; b.mu must be held.
func (d *deadline) phaseLocked() phase {
	switch {
	case d.lapsing != nil:
		return phaseLapsing
	case d.lost != nil && closed(d.lost):
		return phaseEnded
	case d.lost != nil:
		return phaseHolding
	case d.rev == 0:
		return phaseArmed
	}
	return phaseInLine
}

// waitingLocked reports whether d is of a key with no holding, kept or ended:
// armed or in line.
func (d *deadline) waitingLocked() bool {
	p := d.phaseLocked()
	return p == phaseArmed || p == phaseInLine
}

// grantedLocked reports whether d is of a holding, live or ended.
func (d *deadline) grantedLocked() bool {
	p := d.phaseLocked()
	return p == phaseHolding || p == phaseEnded
}

// newDeadlineLocked arms a deadline for key, created at rev (0:
// unknown), to end at at; b.mu must be held.
func (b *Backend) newDeadlineLocked(key string, rev int64, at time.Time) *deadline {
	if b.deadlines == nil {
		b.deadlines = make(map[string]*deadline)
	}
	d := &deadline{rev: rev, at: at}
	d.timer = time.AfterFunc(time.Until(at), func() { b.lapse(key, d) })
	b.deadlines[key] = d
	return d
}

// extendLocked moves d's time to at if that is later; b.mu must be held.
func (d *deadline) extendLocked(at time.Time) {
	if at.After(d.at) {
		d.setLocked(at)
	}
}

// setLocked moves d's time to at, earlier or later; b.mu must be held.
func (d *deadline) setLocked(at time.Time) {
	d.at = at
	d.timer.Reset(time.Until(at))
}

// holdLocked makes d the deadline of a holding on lease l, and returns
// its Grant.Lost: the one it has if it holds on l alone, else a new one
// (closed if l ended). b.mu must be held.
func (d *deadline) holdLocked(l *lease) <-chan struct{} {
	d.place, d.turn, d.behind = nil, 0, 0
	if d.phaseLocked() != phaseHolding || len(d.on) != 1 || d.on[0] != l {
		d.on, d.lost = []*lease{l}, make(chan struct{})
		if l.gone() {
			close(d.lost)
		}
	}
	return d.lost
}

// endLocked ends d's holding, if it holds: Grant.Lost closes. b.mu must
// be held.
func (d *deadline) endLocked() {
	if d.lost != nil && !closed(d.lost) {
		close(d.lost)
	}
}

// vanishLocked ends d's holding and forgets the key's revision and place:
// d is armed again, for whatever key the owner puts next. b.mu must be
// held.
func (d *deadline) vanishLocked() {
	d.endLocked()
	d.rev, d.on, d.lost, d.place, d.turn, d.behind = 0, nil, nil, nil, 0, 0
}

// dropLocked drops the deadline of key, and its owner's record of the
// name; b.mu must be held.
func (b *Backend) dropLocked(key string) {
	if d := b.deadlines[key]; d != nil && d.index != "" && b.names[d.index] == key {
		delete(b.names, d.index)
	}
	delete(b.deadlines, key)
}

// lapse runs on d's timer: the key is deleted if d has passed. A key
// whose create revision is unknown (its attempt's reply was lost) is
// deleted whatever its revision if it has the owner's value: no attempt
// of the owner runs meanwhile.
func (b *Backend) lapse(key string, d *deadline) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadlines[key] != d || d.phaseLocked() == phaseLapsing {
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		return
	}
	d.lapsing = make(chan struct{})
	d.endLocked() // the holding ends with its key
	if d.holds != nil {
		b.lapseIdentityLocked(key, d)
		return
	}
	rev, val := d.rev, d.val
	started := b.goLocked(func() {
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.lapsedLocked(key, d)
		}()
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
		b.lapsedLocked(key, d)
	}
}

// lapsedLocked drops d, the deadline of key, once its deletion is done;
// b.mu must be held.
func (b *Backend) lapsedLocked(key string, d *deadline) {
	if b.deadlines[key] == d {
		b.dropLocked(key)
	}
	close(d.lapsing)
}
