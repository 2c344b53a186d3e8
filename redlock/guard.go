package redlock

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
)

// DefaultMaxTTL is the maximum lease length unless [WithMaxTTL] is given.
const DefaultMaxTTL = redisnode.DefaultMaxTTL

// TokenGrain is the step to which each master rounds its clock down before
// using it as a floor for fencing tokens. It is coarse so that the masters
// of one acquisition, whose clocks differ by a little, usually issue the
// same token and need no write-back (see the package documentation).
const TokenGrain = 100 * time.Millisecond

// WithMaxTTL sets the maximum lease length (default [DefaultMaxTTL]):
// acquisitions and renewals with a longer TTL fail with an error, and a
// master that restarted without its data grants new keys only once it has
// run for d (the restart guard; see the package documentation). Give every
// client of the same masters a d at least as long as the longest TTL any of
// them uses. A d that is not positive makes every call fail.
func WithMaxTTL(d time.Duration) Option { return func(b *Backend) { b.maxTTL = d } }

// WithoutRestartGuard turns the restart guard off, and with it the maximum
// lease length: a master that restarted without its data grants at once,
// and with the holder's other masters it can make a quorum for a second
// holder while the first is valid. Fencing tokens still increase (they
// follow the masters' clocks). Use it where every master persists each
// write (appendonly yes, appendfsync always), or is kept out after a
// restart for longer than the longest TTL in use.
func WithoutRestartGuard() Option { return func(b *Backend) { b.guardOff = true } }

// WithDurableServers tells the restart guard that every master puts each
// write on disk before it answers (appendonly yes, appendfsync always) and
// never starts from an older copy of its data. A master that restarted and
// loaded back the guard's marker from its append-only file has then lost
// no lease, and grants new keys at once instead of waiting out the maximum
// lease length; a master without the marker (brand-new, or started
// without its files) still waits, or needs [Backend.DeclareFresh]. The
// guard checks that the master keeps an append-only file; appendfsync
// always is the user's word. URL: restart_guard=durable.
func WithDurableServers() Option { return func(b *Backend) { b.durable = true } }

// WithoutClockTokens turns off the floor that keeps fencing tokens at or
// above the server clock, so that tokens follow the counter alone and start
// again at 1 when a server loses it. It exists to show, in tests and in
// distlock torture, what the floor prevents; do not use it otherwise.
func WithoutClockTokens() Option { return func(b *Backend) { b.clockOff = true } }

// guard returns the scripts' settings for this backend's options.
func (b *Backend) guard() redisnode.Guard {
	g := redisnode.Guard{MaxTTL: b.maxTTL, Grain: TokenGrain, NoClock: b.clockOff, Durable: b.durable}
	if b.guardOff {
		g.MaxTTL = 0
	}
	return g
}

// checkTTL fails a lease longer than the maximum, or any lease when the
// maximum is not valid.
func (b *Backend) checkTTL(ttl time.Duration) error {
	if b.guardOff {
		return nil
	}
	return redisnode.CheckTTL("redlock", ttl, b.maxTTL)
}

// DeclareFresh tells the restart guard of every master that it has lost no
// data since it last started, so that new keys are granted at once rather
// than after the master has run for the maximum lease length. It is safe
// only when no lease granted before a master's last start can still be
// alive: on brand-new masters, on masters that kept all their data, or when
// nothing has held a lock on them for a maximum lease length. It fails,
// naming the masters, unless every master took the declaration. It waits
// for every master as long as ctx allows (at most 5s each when ctx has no
// deadline).
//
// The declaration lasts until a master restarts (its run id changes).
func (b *Backend) DeclareFresh(ctx context.Context) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	fo := b.fan(ctx, untimed(ctx), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		err := redisnode.DeclareFresh(ctx, rdb, b.prefix, false)
		return reply{node: i, ok: err == nil, err: err}
	})
	rs := make([]reply, len(b.nodes))
	waiting, declared := b.all, 0
	for waiting != 0 {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
		rs[r.node] = r
		if r.ok {
			declared++
		}
	}
	fo.done()
	if declared == len(b.nodes) {
		return nil
	}
	b.mark(rs, waiting, 0, fo.silence())
	e := b.quorumError("declare", "", rs)
	e.Quorum = len(b.nodes)
	return e
}

// warnings returns Inspect's warnings for k, one line each: how the
// masters' eviction policies and persistence put locks at risk (read at
// most once a minute per master), and on how many masters the restart
// guard holds new grants of k back, for how long. Masters that do not
// answer within the node timeout of Inspect are left out.
func (b *Backend) warnings(ctx context.Context, k redisnode.Keys) []string {
	g := b.guard()
	texts := make([]string, len(b.nodes))
	waits := make([]time.Duration, len(b.nodes))
	fo := b.fan(ctx, b.answerTimeout(), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		texts[i] = b.risks[i].Get(ctx, rdb, g.MaxTTL)
		waits[i], _ = redisnode.GuardWait(ctx, rdb, k, g)
		return reply{node: i, ok: true}
	})
	answered := make([]bool, len(b.nodes))
	for waiting := b.all; waiting != 0; {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
		answered[r.node] = true // texts and waits of r.node are written
	}
	fo.done()
	var (
		ws      []string
		byText  = map[string][]string{}
		guarded []string
		longest time.Duration
	)
	for i := range b.nodes {
		addr := b.nodes[i].addr
		if !answered[i] {
			continue
		}
		if texts[i] != "" {
			if _, seen := byText[texts[i]]; !seen {
				ws = append(ws, texts[i])
			}
			byText[texts[i]] = append(byText[texts[i]], addr)
		}
		if waits[i] > 0 {
			guarded = append(guarded, addr)
			longest = max(longest, waits[i])
		}
	}
	for j, w := range ws {
		if nodes := byText[w]; len(nodes) < len(b.nodes) {
			ws[j] = strings.Join(nodes, ", ") + ": " + w
		}
	}
	if len(guarded) > 0 {
		ws = append(ws, strings.Join(guarded, ", ")+": "+redisnode.GuardWarning(longest, g.MaxTTL))
	}
	return ws
}
