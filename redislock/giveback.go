package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// A grant that too few replicas confirmed is given back at once (see
// acquireReplicated). The give-back names the grant by its token, not only
// by its owner: the owner's next attempt may be granted the key again,
// and a give-back still in flight (its reply lost, the request held up in
// the network) must not delete that later grant when it lands. A hold of
// a re-entrant lease shares the lease's token with the owner's later hold
// of the same lease, so the give-back also carries a call id: its first
// run leaves a receipt, and its sendings after that, late or repeated, end
// nothing (receipts last redisnode.ReceiptTTL; a request held up longer in
// the network, while other holds keep the lease alive, is the residual
// risk).
//
// The owner's next attempt must also not be handed the same grant back as
// the confirmation of a lost reply: the late give-back would then delete
// what the attempt reports as held. So until a give-back is known to have
// run, the owner's attempts on the key first send it again; the key then
// no longer holds that grant, and the attempt takes a new one under a new
// token.

const (
	givebackHorizon = 10 * time.Minute // unsettled give-backs remembered
	givebackMax     = 10_000           // most remembered at once
)

// errGivebackUnsettled is returned by an attempt that could not settle an
// earlier give-back of its owner: it may be retried with the same owner.
var errGivebackUnsettled = errors.New("redislock: an earlier give-back of this owner is not yet known to have run")

// givebacks remembers, per key and owner, the token of a grant given back
// without a reply. It is empty unless give-backs fail; the hot path then
// costs one atomic load.
type givebacks struct {
	n  atomic.Int32
	mu sync.Mutex
	m  map[driver.LeaseID]giveback
}

type giveback struct {
	token uint64
	call  string
	until time.Time
}

// unsettled returns the token and call id of owner's unsettled give-back
// on key, or 0.
func (g *givebacks) unsettled(key, owner string) (uint64, string) {
	if g.n.Load() == 0 {
		return 0, ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.m[driver.LeaseID{Key: key, Owner: owner}]
	if !ok || time.Now().After(e.until) {
		return 0, ""
	}
	return e.token, e.call
}

// note records the outcome of a give-back of token, sent as call: settled
// when it is known to have run (or never to have been sent).
func (g *givebacks) note(key, owner string, token uint64, call string, settled bool) {
	k := driver.LeaseID{Key: key, Owner: owner}
	g.mu.Lock()
	defer g.mu.Unlock()
	if settled {
		if e, ok := g.m[k]; ok && e.token == token {
			delete(g.m, k)
		}
		g.n.Store(int32(len(g.m)))
		return
	}
	if g.m == nil {
		g.m = make(map[driver.LeaseID]giveback)
	}
	now := time.Now()
	if _, ok := g.m[k]; !ok && len(g.m) >= givebackMax {
		for old, e := range g.m {
			if now.After(e.until) || len(g.m) >= givebackMax {
				delete(g.m, old)
			}
		}
	}
	g.m[k] = giveback{token: token, call: call, until: now.Add(givebackHorizon)}
	g.n.Store(int32(len(g.m)))
}

// forget drops owner's record on key: its lock call is over.
func (g *givebacks) forget(key, owner string) {
	if g.n.Load() == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, driver.LeaseID{Key: key, Owner: owner})
	g.n.Store(int32(len(g.m)))
}

// giveBack releases owner's grant of token on key, and only that grant, as
// the give-back call, and records whether it is known to have run.
func (b *Backend) giveBack(ctx context.Context, k redisnode.Keys, key, owner string, token uint64, call string) error {
	_, err := redisnode.GiveBack(ctx, b.rdb, k, owner, token, call)
	b.givebacks.note(key, owner, token, call, err == nil || redisnode.NeverSent(err))
	return err
}

// settle sends owner's unsettled give-back on key again, if there is one,
// before an attempt of that owner.
func (b *Backend) settle(ctx context.Context, k redisnode.Keys, key, owner string) error {
	token, call := b.givebacks.unsettled(key, owner)
	if token == 0 {
		return nil
	}
	if err := b.giveBack(ctx, k, key, owner, token, call); err != nil {
		return fmt.Errorf("%w: %w", errGivebackUnsettled, err)
	}
	return nil
}
