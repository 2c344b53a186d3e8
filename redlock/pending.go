package redlock

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// pendingHorizon is how long an owner's unsettled releases are remembered.
// Owners live for one Lock call; a request whose reply was lost does not,
// in practice, run minutes later.
const pendingHorizon = 10 * time.Minute

const (
	pendingSweep = 64     // size from which adding sweeps expired entries
	pendingMax   = 10_000 // most owners remembered
)

// pendingSet tracks, per key and owner, the releases that failed attempts
// sent and that are not known to have run.
//
// Such a release could run after a later attempt of the same owner was
// granted on that node, and delete the grant it counted: the owner would
// hold one node fewer than it believes. A node is therefore blocked for the
// owner while one of its releases there is in flight, or after one ended
// without a reply (unsure), until a later release to it is answered: the
// older one, sent earlier, has then had its chance to run. Blocked nodes are
// not counted by Acquire and Refresh; Acquire sends them that later release
// (a probe) instead, one at a time, so that a node never has two of the
// owner's releases outstanding. Release, the owner's last call, forgets it.
//
// The set is empty unless attempts fail, and the hot path then costs one
// atomic load. It holds at most pendingMax owners: should more fail at
// once, some are forgotten early.
type pendingSet struct {
	n  atomic.Int32 // len(m)
	mu sync.Mutex
	m  map[driver.LeaseID]*pendingEntry
}

type pendingEntry struct {
	inflight uint64 // a release to the node is in flight
	unsure   uint64 // the last release to the node ended without a reply
	until    time.Time
}

// blocked returns the nodes owner must not count, and among them those
// that may be probed (no release in flight).
func (p *pendingSet) blocked(key, owner string) (blocked, probe uint64) {
	if p.n.Load() == 0 {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[driver.LeaseID{Key: key, Owner: owner}]
	if e == nil || time.Now().After(e.until) {
		return 0, 0
	}
	return e.inflight | e.unsure, e.unsure &^ e.inflight
}

// begin records releases about to be sent to nodes.
func (p *pendingSet) begin(key, owner string, nodes uint64) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[driver.LeaseID]*pendingEntry)
	}
	k := driver.LeaseID{Key: key, Owner: owner}
	e := p.m[k]
	if e == nil {
		if len(p.m) >= pendingSweep {
			p.sweep(now)
		}
		e = &pendingEntry{}
		p.m[k] = e
		p.n.Store(int32(len(p.m)))
	}
	e.inflight |= nodes
	e.until = now.Add(pendingHorizon)
}

// end records that the release to node finished; ran reports whether it is
// known to have run (or never to have left this process).
func (p *pendingSet) end(key, owner string, node int, ran bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := driver.LeaseID{Key: key, Owner: owner}
	e := p.m[k]
	if e == nil {
		return
	}
	bit := uint64(1) << node
	e.inflight &^= bit
	if ran {
		e.unsure &^= bit
	} else {
		e.unsure |= bit
	}
	if e.inflight|e.unsure == 0 {
		delete(p.m, k)
		p.n.Store(int32(len(p.m)))
	}
}

// forget drops owner: it will not acquire key again.
func (p *pendingSet) forget(key, owner string) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, driver.LeaseID{Key: key, Owner: owner})
	p.n.Store(int32(len(p.m)))
}

// sweep drops expired entries and, if still full, arbitrary ones (map
// order); p.mu is held.
func (p *pendingSet) sweep(now time.Time) {
	for k, e := range p.m {
		if now.After(e.until) {
			delete(p.m, k)
		}
	}
	for k := range p.m {
		if len(p.m) < pendingMax {
			break
		}
		delete(p.m, k)
	}
}

// count returns the number of set bits, for readability at call sites.
func count(nodes uint64) int { return bits.OnesCount64(nodes) }
