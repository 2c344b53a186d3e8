package redlock

import (
	"sync"
	"sync/atomic"
	"time"
)

// pendingHorizon is how long a node stays set aside for an owner after one
// of its requests there had an unknown outcome. A request whose reply was
// lost can run on its server much later — a paused server runs what it had
// queued when it resumes — but not, in practice, minutes later; and owners
// live for one Lock call.
const pendingHorizon = 10 * time.Minute

const (
	pendingSweep = 64     // size from which adding sweeps expired entries
	pendingMax   = 10_000 // most owners remembered
)

// pendingSet remembers, per key and owner, the nodes on which a release of a
// failed attempt may still be waiting to run: it is added before the
// release is sent and settled when the release is known to have run. Acquire and Refresh of that
// owner leave those nodes out: a late release there could delete a grant
// they counted, and the quorum would be one node smaller than believed.
// Release, the owner's last call, forgets the owner.
//
// The set is empty unless nodes fail, and the hot path then costs one
// atomic load.
//
// It holds at most pendingMax owners: should more fail at once, some are
// forgotten early.
type pendingSet struct {
	n  atomic.Int32 // len(m)
	mu sync.Mutex
	m  map[pendingKey]pendingEntry
}

type pendingKey struct{ key, owner string }

type pendingEntry struct {
	nodes uint64
	until time.Time
}

func (p *pendingSet) get(key, owner string) uint64 {
	if p.n.Load() == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[pendingKey{key, owner}]
	if !ok || time.Now().After(e.until) {
		return 0
	}
	return e.nodes
}

func (p *pendingSet) add(key, owner string, nodes uint64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[pendingKey]pendingEntry)
	}
	if len(p.m) >= pendingSweep {
		for k, e := range p.m {
			if now.After(e.until) {
				delete(p.m, k)
			}
		}
		// Still full: drop entries at random (map order), oldest owners
		// being the likeliest to be done, to bound the memory.
		for k := range p.m {
			if len(p.m) < pendingMax {
				break
			}
			delete(p.m, k)
		}
	}
	k := pendingKey{key, owner}
	p.m[k] = pendingEntry{nodes: p.m[k].nodes | nodes, until: now.Add(pendingHorizon)}
	p.n.Store(int32(len(p.m)))
}

// settle forgets node for owner: its release has run.
func (p *pendingSet) settle(key, owner string, node int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pendingKey{key, owner}
	e, ok := p.m[k]
	if !ok {
		return
	}
	if e.nodes &^= 1 << node; e.nodes == 0 {
		delete(p.m, k)
	} else {
		p.m[k] = e
	}
	p.n.Store(int32(len(p.m)))
}

func (p *pendingSet) clear(key, owner string) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, pendingKey{key, owner})
	p.n.Store(int32(len(p.m)))
}
