package redlock

import (
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/internal/redisnode"
)

// The gate orders contenders for a contended key (see Backend.gate).
const (
	// gateLinger is how long a key counts as contended after this
	// backend's last waiter on it left: the holder that released it and
	// asks again at once goes through the gate too, behind the waiters.
	gateLinger = time.Second
	// gateStale is how long after a refusal at the gate, with no release
	// heard since, a waiter asks every node again: long enough for a
	// handoff, short against a lease.
	gateStale = 250 * time.Millisecond
)

// watchers is what a backend knows of its own waiters on a key.
type watchers struct {
	n         int       // open watches; guarded by Backend.watchMu
	idleSince time.Time // when n fell to 0; guarded by Backend.watchMu
	heard     atomic.Uint64
	refusedAt atomic.Int64 // unix ns of the gate's last refusal, 0: none since a release
}

// watchersOf returns the waiters' record of key, counting one more watch.
func (b *Backend) watchersOf(key string) *watchers {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	ws := b.watched[key]
	if ws == nil {
		if b.watched == nil {
			b.watched = make(map[string]*watchers)
		}
		if len(b.watched) >= 64 {
			for k, old := range b.watched {
				if old.n == 0 && time.Since(old.idleSince) >= gateLinger {
					delete(b.watched, k)
				}
			}
		}
		ws = &watchers{}
		b.watched[key] = ws
	}
	ws.n++
	return ws
}

// unwatch counts one watch of key fewer.
func (b *Backend) unwatch(ws *watchers) {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	if ws.n--; ws.n == 0 {
		ws.idleSince = time.Now()
	}
}

// heardRelease records that a watch of ws's key fired.
func (ws *watchers) heardRelease() {
	ws.heard.Add(1)
	ws.refusedAt.Store(0)
}

// gate returns the node that an attempt on key asks alone first, and
// whether it should: when the key is contended here (this backend has
// waiters on it, or had within gateLinger), the node chosen by the key's
// hash, if it is among ask.
//
// When a release wakes many waiters and each sends its attempt to every
// node, requests from all of them reach every node in a different order:
// the vote splits more often than not, nobody wins, and every node has run
// an attempt of every waiter. Asking the gate first orders the contenders
// by one node: the one it grants goes on to the others, the rest are
// refused after one request each and wait for the next release.
// The gate decides nothing by itself: the lock is still the quorum's, and
// an attempt that fails at the gate (an error, not a refusal) asks every
// node.
//
// A waiter refused by the gate that hears no release for gateStale asks
// every node again, so that a grant left behind on the gate by a client
// that died stalls nobody for long.
func (b *Backend) gate(key string, ask uint64) (int, bool) {
	b.watchMu.Lock()
	ws := b.watched[key]
	contended := ws != nil && (ws.n > 0 || time.Since(ws.idleSince) < gateLinger)
	b.watchMu.Unlock()
	if !contended {
		return 0, false
	}
	if at := ws.refusedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) >= gateStale {
		ws.refusedAt.Store(0)
		return 0, false
	}
	g := b.gateNode(key)
	return g, ask&(1<<g) != 0
}

// gateNode returns the index of key's gate node: the same for every
// client of the same nodes.
func (b *Backend) gateNode(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(b.nodes)))
}

// gateRefused records that the gate refused an attempt on key.
func (b *Backend) gateRefused(key string) {
	b.watchMu.Lock()
	ws := b.watched[key]
	b.watchMu.Unlock()
	if ws != nil {
		ws.refusedAt.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// gateClient returns the client argument of an attempt at the gate node g
// on the lock of k: this client's id if it hears the gate's releases (see
// [redisnode.Notifier.Hears]), and, while it yields on the lock there to
// a client its release woke by name ([redisnode.Yields]), the yielding
// attempt's argument with how much longer the yield lasts.
func (b *Backend) gateClient(k redisnode.Keys, g int) (client string, yielding time.Duration) {
	notify := b.nodes[g].notify
	if b.yields.Any() {
		if mark := notify.Mark(k.Channel); mark != 0 {
			if released, left, ok := b.yields.Active(k.Channel, mark); ok {
				return redisnode.Yielding(notify.ID(), released), left
			}
		}
	}
	return notify.Hears(k.Channel), 0
}
