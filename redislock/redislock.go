package redislock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// DefaultPrefix is put before every key name unless [WithPrefix] is given.
const DefaultPrefix = "distlock:"

// ErrNotReplicated is returned (wrapped) by Acquire when [WithReplicas] is
// set and fewer replicas than asked confirmed the lock in time. The lock
// was released again.
var ErrNotReplicated = errors.New("redislock: lock not confirmed by enough replicas")

// Backend is a distlock backend on one Redis deployment: a standalone
// server, a Sentinel-managed master, or a Cluster. It is safe for
// concurrent use. Use it through distlock.New.
type Backend struct {
	rdb      redis.UniversalClient
	prefix   string
	replicas int
	waitFor  time.Duration
	drift    func(time.Duration) time.Duration
	notify   *redisnode.Notifier
	keys     *redisnode.KeyCache
	ownsRDB  bool
	maxTTL   time.Duration // the restart guard's (see guard.go)
	guardOff bool
}

var (
	_ driver.Backend    = (*Backend)(nil)
	_ driver.Waiter     = (*Backend)(nil)
	_ driver.Inspector  = (*Backend)(nil)
	_ driver.Queuer     = (*Backend)(nil)
	_ driver.TurnWaiter = (*Backend)(nil)
	_ driver.Semaphore  = (*Backend)(nil)
	_ driver.RWLocker   = (*Backend)(nil)
)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key (default [DefaultPrefix]).
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithReplicas makes every acquisition wait, with Redis' WAIT, until n
// replicas have the lock, for at most timeout. If fewer confirm, the lock
// is released and Acquire fails with [ErrNotReplicated].
//
// This narrows the failover window in which a promoted replica does not
// yet know the lock, but does not close it: WAIT is not a consensus
// protocol, a replica that acknowledged can still lose the write, and
// Sentinel may promote a replica that did not acknowledge. Pass the lock's
// fencing token to the resource for the remaining cases.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(b *Backend) { b.replicas, b.waitFor = n, timeout }
}

// WithDrift sets the clock drift allowance subtracted from a lease's TTL
// to get its local validity (default driver.DefaultDrift: 1% + 2ms).
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) { b.drift = f }
}

// New returns a backend on rdb: a *redis.Client, *redis.ClusterClient or
// failover client from github.com/redis/go-redis/v9. The caller keeps
// ownership of rdb; closing the backend only ends its pub/sub connection.
//
// Set up rdb as the package documentation recommends (ContextTimeoutEnabled,
// MaxRetries -1, DialerRetries 1), so that every call ends within its
// context's deadline with an error that names its cause. distlock's
// watchdog ends a lease at its deadline either way.
func New(rdb redis.UniversalClient, opts ...Option) *Backend {
	if v := reflect.ValueOf(rdb); v.Kind() == reflect.Pointer && v.IsNil() {
		rdb = nil // a typed nil client: report it, do not panic on it
	}
	b := &Backend{rdb: rdb, prefix: DefaultPrefix, drift: driver.DefaultDrift, maxTTL: DefaultMaxTTL}
	for _, opt := range opts {
		opt(b)
	}
	if rdb != nil {
		b.notify = redisnode.NewNotifier(rdb, 2*time.Second)
	}
	b.keys = redisnode.NewKeyCache(b.prefix, b.guard())
	return b
}

var errNilClient = errors.New("redislock: nil redis client")

func (b *Backend) check(key string) error {
	if b == nil || b.rdb == nil {
		return errNilClient
	}
	if b.replicas < 0 || (b.replicas > 0 && b.waitFor <= 0) {
		return fmt.Errorf("redislock: WithReplicas(%d, %v): want n >= 0 and a positive timeout", b.replicas, b.waitFor)
	}
	return nil
}

// Capabilities implements driver.Backend: waiters are notified, and fair
// (first-come, first-served) locks are supported.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{NotifiedWait: true, Fair: true, Semaphore: true, ReadWrite: true}
}

// Acquire implements driver.Backend in one round trip (two with WithReplicas).
func (b *Backend) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.check(req.Key); err != nil {
		return driver.Grant{}, err
	}
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	k := b.keys.Get(req.Key)
	desc := redisnode.Describe(req.Meta)
	var (
		token     uint64
		holderTTL time.Duration
		err       error
	)
	if b.replicas > 0 {
		token, holderTTL, err = b.acquireReplicated(ctx, k, req, desc)
	} else if req.Fair {
		token, holderTTL, err = redisnode.AcquireFair(ctx, b.rdb, k, req.Owner, req.TTL, desc, req.Queue)
	} else {
		token, holderTTL, err = redisnode.Acquire(ctx, b.rdb, k, req.Owner, req.TTL, desc)
	}
	if err != nil {
		return driver.Grant{}, err
	}
	if token == 0 {
		return driver.Grant{RetryAfter: holderTTL}, nil
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: req.TTL - b.drift(req.TTL)}, nil
}

// acquireReplicated sends the acquire script and WAIT down one connection
// (WAIT counts the writes of its own connection), to the key's master.
func (b *Backend) acquireReplicated(ctx context.Context, k redisnode.Keys, req driver.AcquireRequest, desc string) (uint64, time.Duration, error) {
	var node redis.Cmdable = b.rdb
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, k.Lock)
		if err != nil {
			return 0, 0, err
		}
		node = m
	}
	run := func() (*redis.Cmd, *redis.IntCmd, error) {
		pipe := node.Pipeline()
		var acq *redis.Cmd
		if req.Fair {
			acq = redisnode.AcquireFairCmd(ctx, pipe, k, req.Owner, req.TTL, desc, req.Queue)
		} else {
			acq = redisnode.AcquireCmd(ctx, pipe, k, req.Owner, req.TTL, desc)
		}
		wait := redisnode.WaitCmd(ctx, pipe, b.replicas, b.waitFor)
		_, err := pipe.Exec(ctx)
		return acq, wait, err
	}
	acq, wait, err := run()
	if redisnode.IsNoScript(acq.Err()) {
		if err := redisnode.LoadScripts(ctx, node); err != nil {
			return 0, 0, err
		}
		acq, wait, err = run()
	}
	if err != nil && acq.Err() != nil {
		return 0, 0, acq.Err()
	}
	n, _ := acq.Int64()
	token, holderTTL, _ := redisnode.Grant(n)
	if token == 0 {
		return 0, holderTTL, nil
	}
	acked, werr := wait.Result()
	if werr == nil && acked >= int64(b.replicas) {
		return token, 0, nil
	}
	// Too few replicas have it: give it back rather than hold a lock a
	// failover could forget.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.waitFor+time.Second)
	defer cancel()
	_, _ = redisnode.Release(rctx, b.rdb, k, req.Owner)
	if werr != nil {
		return 0, 0, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, werr)
	}
	return 0, 0, fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acked, b.replicas, b.waitFor)
}

// Release implements driver.Backend in one round trip: compare-and-delete
// and the wake-up of waiters.
func (b *Backend) Release(ctx context.Context, key, owner string) error {
	if err := b.check(key); err != nil {
		return err
	}
	ok, err := redisnode.Release(ctx, b.rdb, b.keys.Get(key), owner)
	if err != nil {
		return err
	}
	if !ok {
		return driver.ErrNotHeld
	}
	return nil
}

// Refresh implements driver.Backend: compare-and-PEXPIRE; with
// WithReplicas, then WAIT, on the same connection.
func (b *Backend) Refresh(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.check(key); err != nil {
		return 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	var ok bool
	var err error
	if b.replicas > 0 {
		ok, err = b.refreshReplicated(ctx, b.keys.Get(key), owner, ttl)
	} else {
		ok, err = redisnode.Refresh(ctx, b.rdb, b.keys.Get(key), owner, ttl)
	}
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, driver.ErrNotHeld
	}
	return ttl - b.drift(ttl), nil
}

// AcquirePermit implements driver.Semaphore in one round trip. WithReplicas
// does not apply to semaphores.
func (b *Backend) AcquirePermit(ctx context.Context, req driver.AcquireRequest, n int) (driver.Grant, error) {
	if err := b.check(req.Key); err != nil {
		return driver.Grant{}, err
	}
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	token, wait, err := redisnode.AcquirePermit(ctx, b.rdb, b.keys.Get(req.Key), req.Owner, req.TTL, n)
	return b.grant(token, wait, req.TTL, err)
}

// ReleasePermit implements driver.Semaphore.
func (b *Backend) ReleasePermit(ctx context.Context, key, owner string) error {
	if err := b.check(key); err != nil {
		return err
	}
	return notHeld(redisnode.ReleasePermit(ctx, b.rdb, b.keys.Get(key), owner))
}

// RefreshPermit implements driver.Semaphore.
func (b *Backend) RefreshPermit(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.check(key); err != nil {
		return 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	if err := notHeld(redisnode.RefreshPermit(ctx, b.rdb, b.keys.Get(key), owner, ttl)); err != nil {
		return 0, err
	}
	return ttl - b.drift(ttl), nil
}

// AcquireExclusive implements driver.RWLocker: a writer, in one round trip.
func (b *Backend) AcquireExclusive(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.check(req.Key); err != nil {
		return driver.Grant{}, err
	}
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	token, wait, err := redisnode.AcquireWrite(ctx, b.rdb, b.keys.Get(req.Key), req.Owner, req.TTL, redisnode.Describe(req.Meta), req.Queue)
	return b.grant(token, wait, req.TTL, err)
}

// AcquireShared implements driver.RWLocker: a reader, in one round trip.
func (b *Backend) AcquireShared(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if err := b.check(req.Key); err != nil {
		return driver.Grant{}, err
	}
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	token, wait, err := redisnode.AcquireRead(ctx, b.rdb, b.keys.Get(req.Key), req.Owner, req.TTL)
	return b.grant(token, wait, req.TTL, err)
}

// ReleaseShared implements driver.RWLocker.
func (b *Backend) ReleaseShared(ctx context.Context, key, owner string) error {
	if err := b.check(key); err != nil {
		return err
	}
	return notHeld(redisnode.ReleaseRead(ctx, b.rdb, b.keys.Get(key), owner))
}

// RefreshShared implements driver.RWLocker.
func (b *Backend) RefreshShared(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if err := b.check(key); err != nil {
		return 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	if err := notHeld(redisnode.RefreshRead(ctx, b.rdb, b.keys.Get(key), owner, ttl)); err != nil {
		return 0, err
	}
	return ttl - b.drift(ttl), nil
}

// grant turns a script's outcome into a driver.Grant.
func (b *Backend) grant(token uint64, wait, ttl time.Duration, err error) (driver.Grant, error) {
	switch {
	case err != nil:
		return driver.Grant{}, err
	case token == 0:
		return driver.Grant{RetryAfter: wait}, nil
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: ttl - b.drift(ttl)}, nil
}

// notHeld maps a script's "owner did not hold it" to driver.ErrNotHeld.
func notHeld(ok bool, err error) error {
	if err == nil && !ok {
		return driver.ErrNotHeld
	}
	return err
}

// Leave implements driver.Queuer.
func (b *Backend) Leave(ctx context.Context, key, owner string) error {
	if err := b.check(key); err != nil {
		return err
	}
	return redisnode.Leave(ctx, b.rdb, b.keys.Get(key), owner)
}

// Watch implements driver.Waiter over the client's shared subscription.
func (b *Backend) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := b.check(key); err != nil {
		return nil, err
	}
	return b.notify.Watch(ctx, b.keys.Get(key).Channel)
}

// WatchTurn implements driver.TurnWaiter: a release wakes only the fair
// waiter whose turn it is.
func (b *Backend) WatchTurn(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.check(key); err != nil {
		return nil, err
	}
	return b.notify.WatchFor(ctx, b.keys.Get(key).Channel, owner)
}

// Inspect implements driver.Inspector.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(key); err != nil {
		return driver.Info{}, err
	}
	st, err := redisnode.Inspect(ctx, b.rdb, b.keys.Get(key))
	if err != nil {
		return driver.Info{}, err
	}
	return driver.Info{Held: st.Held, Token: st.Token, TTL: st.TTL, Meta: st.Meta}, nil
}

// Close ends the backend's pub/sub connection, and closes the client too
// if the backend opened it from a URL.
func (b *Backend) Close() error {
	if b == nil || b.rdb == nil {
		return nil
	}
	err := b.notify.Close()
	if b.ownsRDB {
		err = errors.Join(err, b.rdb.Close())
	}
	return err
}
