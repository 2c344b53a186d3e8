package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
)

// DefaultMaxTTL is the maximum lease length unless [WithMaxTTL] is given.
const DefaultMaxTTL = redisnode.DefaultMaxTTL

// WithMaxTTL sets the maximum lease length (default [DefaultMaxTTL]):
// acquisitions and renewals with a longer TTL fail at once with an error
// wrapping errors.ErrUnsupported, and after a server restart that lost the
// data, keys without a fencing counter are granted only once the server
// has run for d (the restart guard; see the package documentation). The
// guard covers the leases of other clients only up to d: give every client
// of the same servers the same d, at least the longest TTL any of them
// uses. A d that is not positive makes every call fail.
func WithMaxTTL(d time.Duration) Option { return func(b *Backend) { b.maxTTL = d } }

// WithoutRestartGuard turns the restart guard off, and with it the maximum
// lease length: a server that restarted without its data grants at once,
// and a holder from before the restart can then overlap a new one until
// its lease ends. Fencing tokens still increase (they follow the server
// clock). Use it where every server persists each write (appendonly yes,
// appendfsync always) and is never restarted from an older copy.
func WithoutRestartGuard() Option { return func(b *Backend) { b.guardOff = true } }

// WithDurableServers tells the restart guard that every server puts each
// write on disk before it answers (appendonly yes, appendfsync always) and
// never starts from an older copy of its data. A server that restarted and
// loaded back the guard's marker from its append-only file has then lost
// no lease, and grants new keys at once instead of waiting out the maximum
// lease length; a server without the marker (brand-new, or started
// without its files) still waits, or needs [Backend.DeclareFresh]. The
// guard checks that the server keeps an append-only file; appendfsync
// always is the user's word. URL: restart_guard=durable.
func WithDurableServers() Option { return func(b *Backend) { b.durable = true } }

// WithoutClockTokens turns off the floor that keeps fencing tokens at or
// above the server clock, so that tokens follow the counter alone and start
// again at 1 when a server loses it. It exists to show, in tests and in
// distlock torture, what the floor prevents; do not use it otherwise.
func WithoutClockTokens() Option { return func(b *Backend) { b.clockOff = true } }

// guard returns the scripts' settings for this backend's options.
func (b *Backend) guard() redisnode.Guard {
	_, cluster := b.rdb.(*redis.ClusterClient)
	g := redisnode.Guard{MaxTTL: b.maxTTL, Grain: time.Microsecond, Cluster: cluster, NoClock: b.clockOff, Durable: b.durable}
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
	return redisnode.CheckTTL("redislock", ttl, b.maxTTL)
}

// DeclareFresh tells the restart guard that the servers of this deployment
// (every master, on Cluster) have lost no data since they last started,
// so that new keys are granted at once rather than after the servers have
// run for the maximum lease length. It is safe only when no lease granted
// before their last start can still be alive: on brand-new servers, on
// servers that kept all their data, or when nothing has held a lock on
// them for a maximum lease length. Declaring it wrongly lets a holder from
// before a data loss overlap a new one.
//
// The declaration lasts until a server restarts (its run id changes) and
// is replicated with the data. Call it once, after the servers start; a
// lock taken on a server keeps working without it once the server has run
// for the maximum lease length.
func (b *Backend) DeclareFresh(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	return redisnode.DeclareFresh(ctx, b.rdb, b.prefix, b.guard().Cluster)
}

// warnings returns Inspect's warnings for k: how the servers' eviction
// policy and persistence put locks at risk (read at most once a minute),
// and how long the restart guard still holds new grants of k back.
func (b *Backend) warnings(ctx context.Context, k redisnode.Keys) []string {
	var ws []string
	g := b.guard()
	if w := b.risks.Get(ctx, b.rdb, g.MaxTTL); w != "" {
		ws = append(ws, w)
	}
	if wait, err := redisnode.GuardWait(ctx, b.rdb, k, g); err == nil && wait > 0 {
		ws = append(ws, redisnode.GuardWarning(wait, g.MaxTTL))
	}
	return ws
}

// refreshReplicated extends owner's lease on the master of b.rdb and waits,
// on the same connection, until b.replicas replicas have the extension. It
// has the signature of redisnode.Refresh; the client it is given is b.rdb.
func (b *Backend) refreshReplicated(ctx context.Context, _ redis.Scripter, k redisnode.Keys, owner string, ttl time.Duration) (bool, error) {
	held, acked, err := redisnode.RefreshWait(ctx, b.rdb, k, owner, ttl, b.replicas, b.waitFor)
	switch {
	case !held:
		return false, err
	case err != nil:
		return false, fmt.Errorf("%w: renewal: WAIT: %w", ErrNotReplicated, err)
	case acked < b.replicas:
		return false, fmt.Errorf("%w: renewal confirmed by %d of %d within %v", ErrNotReplicated, acked, b.replicas, b.waitFor)
	}
	return true, nil
}
