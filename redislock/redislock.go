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
	rdb       redis.UniversalClient
	prefix    string
	replicas  int
	waitFor   time.Duration
	drift     func(time.Duration) time.Duration
	notify    *redisnode.Notifier
	keys      *redisnode.KeyCache
	ownsRDB   bool
	maxTTL    time.Duration // the restart guard's (see guard.go)
	guardOff  bool
	durable   bool
	clockOff  bool
	risks     redisnode.RiskCache
	givebacks givebacks          // see giveback.go
	yields    redisnode.Yields   // see redisnode.Yields
	opts      driver.OptionCheck // the first invalid option, if any
}

var (
	_ driver.Backend     = (*Backend)(nil)
	_ driver.MarkWatcher = (*Backend)(nil)
)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key (default [DefaultPrefix]).
// On Redis Cluster, a "{" in it must open a whole hash tag ("{app}:" puts
// every lock in one slot): a prefix whose brace would run into the tag of
// the lock's name fails every call with an error wrapping
// driver.ErrInvalidBackend.
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithReplicas makes every acquisition of a mutex, and every renewal of
// one, wait with Redis' WAIT until n replicas have it, for at most timeout.
// If fewer confirm an acquisition, the lock is released and Acquire fails
// with [ErrNotReplicated]; if fewer confirm a renewal, Refresh fails with
// it and the lease keeps its previous deadline.
//
// This narrows the failover window in which a promoted replica does not
// know the lock, or knows an older expiry, but does not close it: WAIT is
// not a consensus protocol, a replica that acknowledged can still lose the
// write, and Sentinel may promote a replica that did not acknowledge (see
// the package documentation). Pass the lock's fencing token to the
// resource for the remaining cases.
//
// An n below 0, or a timeout that is not positive with n above 0, fails
// every call with an error wrapping driver.ErrInvalidBackend.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(b *Backend) {
		if n < 0 || n > 0 && timeout <= 0 {
			b.opts.Invalid("redislock", fmt.Sprintf("WithReplicas(%d, %v)", n, timeout), "want n >= 0 and a positive timeout")
			return
		}
		b.replicas, b.waitFor = n, timeout
	}
}

// WithDrift sets the clock drift allowance subtracted from a lease's TTL
// to get its local validity (default driver.DefaultDrift: 1% + 2ms). A nil
// f fails every call with an error wrapping driver.ErrInvalidBackend.
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) {
		if f == nil {
			b.opts.Invalid("redislock", "WithDrift(nil)", "want a drift function")
			return
		}
		b.drift = f
	}
}

// New returns a backend on rdb: a *redis.Client, *redis.ClusterClient or
// failover client from github.com/redis/go-redis/v9. The caller keeps
// ownership of rdb; closing the backend only ends its pub/sub connection.
//
// Set up rdb as the package documentation recommends (ContextTimeoutEnabled,
// MaxRetries -1, DialerRetries 1), so that every call ends within its
// context's deadline with an error that names its cause. distlock's
// watchdog ends a lease at its deadline either way.
//
// An invalid option (a nil one among them) makes every method fail with
// an error wrapping driver.ErrInvalidBackend that names it.
func New(rdb redis.UniversalClient, opts ...Option) *Backend {
	if v := reflect.ValueOf(rdb); v.Kind() == reflect.Pointer && v.IsNil() {
		rdb = nil // a typed nil client: report it, do not panic on it
	}
	b := &Backend{rdb: rdb, prefix: DefaultPrefix, drift: driver.DefaultDrift, maxTTL: DefaultMaxTTL}
	for _, opt := range opts {
		if opt == nil {
			b.opts.Invalid("redislock", "New", "a nil Option")
			continue
		}
		opt(b)
	}
	if rdb != nil {
		b.notify = redisnode.NewNotifier(rdb, 2*time.Second)
		warnClientOptions(rdb)
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		if err := redisnode.CheckPrefix(b.prefix); err != nil {
			b.opts.Invalid("redislock", fmt.Sprintf("WithPrefix(%q)", b.prefix), err.Error())
		}
	}
	b.keys = redisnode.NewKeyCache(b.prefix, b.guard())
	return b
}

var errNilClient = fmt.Errorf("redislock: nil redis client: %w", driver.ErrInvalidBackend)

// usable reports whether b can serve calls: a backend that cannot (no
// client, an invalid option; see [driver.OptionCheck]) fails every call
// with an error wrapping driver.ErrInvalidBackend, which a waiting Lock
// does not retry.
func (b *Backend) usable() error {
	if b == nil || b.rdb == nil {
		return errNilClient
	}
	return b.opts.Err()
}

// check is usable for a call given a key alone (Watch, Inspect), which
// must be a key the contract allows: an empty one would leave its keys'
// hash tag empty, and Redis Cluster would spread them over slots.
func (b *Backend) check(key string) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := driver.ValidateKey(key); err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	return nil
}

// checkLease is usable for a Release of l: the contract's check of the
// lease (Refresh checks its TTL too, with Lease.ValidateRefresh).
func (b *Backend) checkLease(l driver.Lease) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	return nil
}

// checkMillis fails a lease shorter than the millisecond Redis counts in,
// a limit narrower than the contract's.
func checkMillis(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("redislock: TTL %v is below a millisecond: %w", ttl, driver.ErrInvalidRequest)
	}
	return nil
}

// Capabilities implements driver.Backend: waiters are notified (fair ones
// in turn), and fair locks, read-write locks, semaphores and re-entrant
// locks (fair ones too) are offered.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// Acquire implements driver.Backend in one round trip (two with
// WithReplicas, which applies to mutexes only).
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.usable(); err != nil {
		return driver.Grant{}, err
	}
	if err := req.Validate(b.Capabilities()); err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: %w", err)
	}
	if err := checkMillis(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	if err := b.checkTTL(req.TTL); err != nil {
		return driver.Grant{}, err
	}
	k := b.keys.Get(req.Key)
	var (
		token uint64
		wait  time.Duration
		err   error
	)
	switch req.Kind {
	case driver.Exclusive:
		desc := redisnode.Describe(req.Meta)
		switch {
		case b.replicas > 0:
			token, wait, err = b.acquireReplicated(ctx, k, req, desc)
		case req.Reentry != "" && req.Fair:
			// A re-entrant lease's first hold waits its turn; it takes no
			// hand-over, which grants a plain lease.
			token, wait, err = redisnode.AcquireFair(ctx, b.rdb, k, req.Owner, req.TTL, desc, req.Queue, "", req.Reentry)
		case req.Reentry != "":
			token, wait, err = redisnode.AcquireReentrant(ctx, b.rdb, k, req.Owner, req.TTL, desc, req.Reentry)
		case req.Fair:
			stamp := ""
			if req.Queue > 0 {
				if g, ok := b.handedOver(req.Owner); ok {
					return g, nil
				}
				stamp = redisnode.Stamp()
			}
			token, wait, err = redisnode.AcquireFair(ctx, b.rdb, k, req.Owner, req.TTL, desc, req.Queue, stamp, "")
		default:
			token, wait, err = b.acquirePlain(ctx, k, req, desc)
		}
	case driver.Write:
		token, wait, err = redisnode.AcquireWrite(ctx, b.rdb, k, req.Owner, req.TTL, redisnode.Describe(req.Meta), req.Queue)
	case driver.Read:
		token, wait, err = redisnode.AcquireRead(ctx, b.rdb, k, req.Owner, req.TTL)
	case driver.Permit:
		token, wait, err = redisnode.AcquirePermit(ctx, b.rdb, k, req.Owner, req.TTL, req.Limit)
	default:
		return driver.Grant{}, fmt.Errorf("redislock: unknown lock kind %d", req.Kind)
	}
	switch {
	case err != nil:
		// Declared here, not above: its address goes to errors.As, which
		// would put it on the heap on every call.
		var guarded *redisnode.GuardError
		if errors.As(err, &guarded) {
			return driver.Grant{RetryAfter: guarded.Wait, Guarded: true}, nil
		}
		return driver.Grant{}, misconfigured(err)
	case token == 0:
		return driver.Grant{RetryAfter: wait}, nil
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: req.TTL - b.drift(req.TTL)}, nil
}

// acquirePlain makes one attempt at a plain mutex. The attempt enlists
// this client when refused, if the client hears the lock's releases: the
// release then wakes this client alone. While the client yields on the
// lock (see redisnode.Yields) and hears its releases, the attempt only enlists it;
// such an attempt leaves alone what [redisnode.Notifier.Hears] would say
// of a release that named this client before, for the next real attempt.
func (b *Backend) acquirePlain(ctx context.Context, k redisnode.Keys, req driver.Request, desc string) (uint64, time.Duration, error) {
	if b.yields.Any() {
		if mark := b.notify.Mark(k.Channel); mark != 0 {
			if released, left, ok := b.yields.Active(k.Channel, mark); ok {
				_, _, err := redisnode.AcquireAs(ctx, b.rdb, k, req.Owner, req.TTL, desc, redisnode.Yielding(b.notify.ID(), released))
				return 0, left, err
			}
		}
	}
	return redisnode.AcquireAs(ctx, b.rdb, k, req.Owner, req.TTL, desc, b.notify.Hears(k.Channel))
}

// handedOver returns the grant a release handed over to owner, a fair
// waiter, if one came and enough of its lease is left to trust it: at
// least half. Otherwise the next attempt finds the lease, if it is still
// there, and renews it for the full TTL.
//
// The release that makes it a fair waiter's turn gives it the lock at once
// and says so on the lock's channel (see the release script), so the
// waiter holds the lock without another round trip. The lease is as long
// as the waiter's place in the line, no longer: a waiter that vanished
// holds the lock up no longer than its place would have.
func (b *Backend) handedOver(owner string) (driver.Grant, bool) {
	h, ok := b.notify.TakeGrant(owner)
	if !ok {
		return driver.Grant{}, false
	}
	valid := time.Until(h.Sent.Add(h.Lease - b.drift(h.Lease)))
	if valid < h.Lease/2 {
		return driver.Grant{}, false
	}
	return driver.Grant{Acquired: true, Token: h.Token, ValidFor: valid}, true
}

// acquireReplicated sends the acquire script and WAIT down one connection
// (WAIT counts the writes of its own connection), to the key's master.
func (b *Backend) acquireReplicated(ctx context.Context, k redisnode.Keys, req driver.Request, desc string) (uint64, time.Duration, error) {
	var node redis.Cmdable = b.rdb
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, k.Lock)
		if err != nil {
			return 0, 0, err
		}
		node = m
	}
	if err := b.settle(ctx, k, req.Key, req.Owner); err != nil {
		return 0, 0, err
	}
	run := func() (*redis.Cmd, *redis.IntCmd, error) {
		pipe := node.Pipeline()
		var acq *redis.Cmd
		switch {
		case req.Fair:
			acq = redisnode.AcquireFairCmd(ctx, pipe, k, req.Owner, req.TTL, desc, req.Queue, req.Reentry)
		case req.Reentry != "":
			acq = redisnode.AcquireReentrantCmd(ctx, pipe, k, req.Owner, req.TTL, desc, req.Reentry)
		default:
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
	token, holderTTL, err := redisnode.ReadGrant(acq, k)
	if err != nil || token == 0 {
		return 0, holderTTL, err
	}
	acked, werr := wait.Result()
	if werr == nil && acked >= int64(b.replicas) {
		return token, 0, nil
	}
	// Too few replicas have it: give it back rather than hold a lock a
	// failover could forget (see giveback.go).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.waitFor+time.Second)
	defer cancel()
	_ = b.giveBack(rctx, k, req.Key, req.Owner, token, redisnode.Stamp())
	if werr != nil {
		return 0, 0, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, werr)
	}
	return 0, 0, fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acked, b.replicas, b.waitFor)
}

// Release implements driver.Backend in one round trip: compare-and-delete
// and the wake-up of waiters (for a fair waiter that gave up, a second one
// takes it out of the line).
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.checkLease(l); err != nil {
		return err
	}
	k := b.keys.Get(l.Key)
	b.givebacks.forget(l.Key, l.Owner)
	var (
		ok  bool
		err error
	)
	switch l.Kind {
	case driver.Read:
		ok, err = redisnode.ReleaseRead(ctx, b.rdb, k, l.Owner)
	case driver.Permit:
		ok, err = redisnode.ReleasePermit(ctx, b.rdb, k, l.Owner)
	default:
		ok, err = b.release(ctx, k, l)
	}
	if err == nil && !ok && l.Kind == driver.Exclusive {
		err = redisnode.Leave(ctx, b.rdb, k, l.Owner)
	}
	if err == nil && !ok {
		return driver.ErrNotHeld
	}
	return misconfigured(err)
}

// release releases the lock l of this client's (see
// [redisnode.ReleaseAs]), and yields on it when the release woke another
// client by name (see redisnode.Yields). The channel's mark is taken before the
// release is sent: a message for this client from then on ends the yield.
func (b *Backend) release(ctx context.Context, k redisnode.Keys, l driver.Lease) (bool, error) {
	mark := b.notify.Mark(k.Channel)
	ok, yield, err := redisnode.ReleaseAs(ctx, b.rdb, k, l.Owner, b.notify.ID())
	if yield != 0 {
		b.yields.Start(k.Channel, yield, mark)
	}
	return ok, err
}

// Refresh implements driver.Backend: compare-and-extend, in one round trip
// (with WithReplicas, a mutex's renewal then waits for the replicas, as its
// acquisition does).
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := b.usable(); err != nil {
		return 0, err
	}
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("redislock: %w", err)
	}
	if err := checkMillis(ttl); err != nil {
		return 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	refresh := byKind(l.Kind, redisnode.RefreshRead, redisnode.RefreshPermit, redisnode.Refresh)
	if b.replicas > 0 && l.Kind == driver.Exclusive {
		refresh = b.refreshReplicated
	}
	ok, err := refresh(ctx, b.rdb, b.keys.Get(l.Key), l.Owner, ttl)
	switch {
	case err != nil:
		return 0, misconfigured(err)
	case !ok:
		return 0, driver.ErrNotHeld
	}
	return ttl - b.drift(ttl), nil
}

// byKind returns the operation on a reader, on a permit, or on the lock,
// for a lease of kind.
func byKind[F any](kind driver.Kind, reader, permit, lock F) F {
	switch kind {
	case driver.Read:
		return reader
	case driver.Permit:
		return permit
	}
	return lock
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
