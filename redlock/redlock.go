package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// DefaultPrefix is put before every key name unless [WithPrefix] is given.
// It is redislock's too: the key layout on each node is the same.
const DefaultPrefix = "distlock:"

// MaxNodes is the largest number of masters a Backend accepts.
const MaxNodes = 64

// Bounds of [DefaultNodeTimeout].
const (
	MinDefaultNodeTimeout = 2 * time.Millisecond
	MaxDefaultNodeTimeout = 50 * time.Millisecond
)

// DefaultNodeTimeout returns the per-node timeout used for a lease of length
// ttl unless [WithNodeTimeout] is given: ttl/10, at least 2ms and at most
// 50ms.
//
// The timeout is how long an operation waits for a node that does not
// answer. A healthy master answers in well under a millisecond on a LAN and
// in a few milliseconds across zones (fsync'd AOF included); one that has
// not answered in 50ms is stalled, partitioned or paused, and waiting longer
// only spends the lease: an acquisition that waits out the timeout keeps at
// least 90% of its TTL, less the drift allowance. Operations stop waiting
// sooner whenever the remaining nodes can no longer change the outcome, so
// a dead node costs nothing and a paused one costs one timeout.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, MinDefaultNodeTimeout), MaxDefaultNodeTimeout)
}

// Backend is a distlock backend implementing the Redlock algorithm over N
// independent Redis masters. It is safe for concurrent use. Use it through
// distlock.New; see the package documentation for the algorithm and its
// guarantees.
type Backend struct {
	nodes  []node
	all    uint64 // bit i stands for nodes[i]
	quorum int

	prefix      string
	keys        *redisnode.KeyCache
	nodeTimeout time.Duration // 0: DefaultNodeTimeout(ttl)
	drift       func(time.Duration) time.Duration
	now         func() time.Time // the clock that measures elapsed time

	maxTTL    time.Duration // the restart guard's (see guard.go)
	guardOff  bool
	clockOff  bool
	risks     []redisnode.RiskCache // per node
	err       error                 // set by New when the configuration cannot work
	pending   pendingSet
	stop      chan struct{} // closed by Close: workers exit
	ownsRDB   bool          // opened from a URL: Close closes the clients
	closeOnce sync.Once
	closeErr  error
}

type node struct {
	rdb     redis.UniversalClient
	addr    string
	notify  *redisnode.Notifier
	lastErr atomic.Pointer[error] // the node's latest failure, for errors that skip it
	tasks   chan task             // idle workers receive here (see dispatch)
}

var _ driver.Backend = (*Backend)(nil)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key (default [DefaultPrefix]).
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithNodeTimeout sets how long an operation waits for each node (default
// [DefaultNodeTimeout] of the lease's TTL; for Release, 50ms). Raise it when
// the masters are further apart than a few milliseconds; keep it small
// against the TTL, since the time an acquisition takes comes off the lease.
// A timeout that is not positive makes every call fail.
func WithNodeTimeout(d time.Duration) Option {
	return func(b *Backend) {
		if d <= 0 {
			b.invalid(fmt.Errorf("redlock: WithNodeTimeout(%v): want a positive timeout", d))
			return
		}
		b.nodeTimeout = d
	}
}

// WithDrift sets the clock drift allowance subtracted from a lease's TTL to
// get its local validity (default driver.DefaultDrift: 1% of the TTL plus
// 2ms, the figure of the Redlock description). It covers the rate at which
// the clocks of the client and of the masters may differ over one lease. A
// nil function makes every call fail.
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) {
		if f == nil {
			b.invalid(errors.New("redlock: WithDrift(nil)"))
			return
		}
		b.drift = f
	}
}

func (b *Backend) invalid(err error) {
	if b.err == nil {
		b.err = err
	}
}

// New returns a backend on clients, one go-redis client per independent
// Redis master, typically *redis.Client. Set up each with
//
//	ContextTimeoutEnabled: true // the per-node timeout ends the call itself
//	MaxRetries: -1, DialerRetries: 1
//
// Without the first, a node that stops answering holds a call (not the
// backend, which stops waiting) for the client's ReadTimeout. Without the
// others, go-redis retries a failed node with backoff until the node
// timeout, and the error says "context deadline exceeded" instead of why
// the node failed. The caller keeps ownership of the clients;
// [Backend.Close] only ends the backend's pub/sub connections and workers.
//
// Use an odd number of masters. A quorum is N/2+1, so N masters tolerate
// (N-1)/2 failures: 3 tolerate 1 and 5 tolerate 2. An even number adds a
// master that must be kept running without tolerating one more failure
// (4 tolerate 1, like 3; 6 tolerate 2, like 5), and makes a split vote
// between two contenders more likely.
//
// New does not fail: with no clients, a nil client, two clients of the same
// address or an invalid option, every call of the backend returns an error
// that says so.
func New(clients []redis.UniversalClient, opts ...Option) *Backend {
	b := &Backend{prefix: DefaultPrefix, drift: driver.DefaultDrift, now: time.Now, maxTTL: DefaultMaxTTL}
	for _, opt := range opts {
		if opt != nil {
			opt(b)
		}
	}
	switch {
	case len(clients) == 0:
		b.invalid(ErrNoNodes)
	case len(clients) > MaxNodes:
		b.invalid(fmt.Errorf("redlock: %d clients; at most %d masters are supported", len(clients), MaxNodes))
	}
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			b.invalid(fmt.Errorf("redlock: client %d of %d is nil", i, len(clients)))
			continue
		}
		addr, known := addrOf(c, i)
		if j, dup := seen[addr]; dup && known {
			b.invalid(fmt.Errorf("redlock: clients %d and %d both connect to %s: Redlock needs independent masters", j, i, addr))
		}
		seen[addr] = i
		b.nodes = append(b.nodes, node{rdb: c, addr: addr})
	}
	if b.err != nil {
		b.nodes = nil
		return b
	}
	b.keys = redisnode.NewKeyCache(b.prefix, b.guard())
	b.stop = make(chan struct{})
	for i := range b.nodes {
		b.nodes[i].notify = redisnode.NewNotifier(b.nodes[i].rdb, 2*time.Second)
		b.nodes[i].tasks = make(chan task)
	}
	b.risks = make([]redisnode.RiskCache, len(b.nodes))
	b.all = (uint64(1) << len(b.nodes)) - 1
	b.quorum = len(b.nodes)/2 + 1
	return b
}

// isNil reports whether c is nil or a typed nil pointer, which would panic
// on first use.
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// addrOf names client i for errors; known reports whether the name is a
// real host:port (two clients with the same one are the same master).
func addrOf(c redis.UniversalClient, i int) (addr string, known bool) {
	if o, ok := c.(interface{ Options() *redis.Options }); ok {
		if opt := o.Options(); opt != nil {
			if _, _, err := net.SplitHostPort(opt.Addr); err == nil {
				return opt.Addr, true
			}
		}
	}
	return "node " + strconv.Itoa(i), false
}

var errNilContext = errors.New("redlock: nil context")

func (b *Backend) check(ctx context.Context) error {
	if b == nil {
		return ErrNoNodes
	}
	if b.err != nil {
		return b.err
	}
	if len(b.nodes) == 0 { // a Backend not made by New
		return ErrNoNodes
	}
	if ctx == nil {
		return errNilContext
	}
	return nil
}

// Quorum returns how many masters must agree: N/2+1 (0 for a Backend that
// cannot work).
func (b *Backend) Quorum() int {
	if b == nil {
		return 0
	}
	return b.quorum
}

// Addrs returns the masters' addresses, in the order given to New, as
// errors name them.
func (b *Backend) Addrs() []string {
	if b == nil {
		return nil
	}
	addrs := make([]string, len(b.nodes))
	for i := range b.nodes {
		addrs[i] = b.nodes[i].addr
	}
	return addrs
}

func (b *Backend) timeout(ttl time.Duration) time.Duration {
	if b.nodeTimeout > 0 {
		return b.nodeTimeout
	}
	return DefaultNodeTimeout(ttl)
}

func (b *Backend) releaseTimeout() time.Duration {
	if b.nodeTimeout > 0 {
		return b.nodeTimeout
	}
	return MaxDefaultNodeTimeout
}

// validity returns how long after an operation's start a lease of ttl can
// be trusted, or an error if the drift allowance leaves nothing.
func (b *Backend) validity(ttl time.Duration) (time.Duration, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("redlock: TTL %v is not positive", ttl)
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, err
	}
	v := ttl - b.drift(ttl)
	if v <= 0 {
		return 0, fmt.Errorf("redlock: TTL %v is not above its drift allowance %v", ttl, b.drift(ttl))
	}
	return v, nil
}

// Capabilities implements driver.Backend: waiters are notified, and
// mutexes may be re-entrant. Redlock takes mutexes only: not fair or
// read-write locks, nor semaphores.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Reentrant: true}
}

// Acquire implements driver.Backend. It sends the acquire script to every
// master at once and succeeds if a quorum granted the lock and the lease is
// still valid: TTL - elapsed - drift > 0, with elapsed measured from the
// start of the call. Grant.ValidFor is TTL - drift, counted (by the caller)
// from the start of the attempt, so that start+ValidFor is that deadline.
//
// It stops waiting as soon as the replies so far decide the outcome. On
// failure it releases the lock on every node that granted it, failed or did
// not answer, then reports the lock not obtained (nil error) if a node
// refused and the failed nodes alone would have left a quorum possible —
// the lock is held, or being taken, elsewhere — and a [*QuorumError]
// otherwise: too many nodes failed for a quorum, whatever the others say.
//
// The fencing token is the largest token of the granting nodes, written back
// to them first when they disagree; see the package documentation.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.check(ctx); err != nil {
		return driver.Grant{}, err
	}
	if req.Kind != driver.Exclusive || req.Fair {
		return driver.Grant{}, fmt.Errorf("redlock: mutexes only (kind %d, fair %v): %w",
			req.Kind, req.Fair, errors.ErrUnsupported)
	}
	validFor, err := b.validity(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	start := b.now()
	k := b.keys.Get(req.Key)
	desc := redisnode.Describe(req.Meta)
	owner, ttl := req.Owner, req.TTL
	// Nodes where a release of this owner may still be pending are not
	// asked (see pendingSet); they are probed instead. If too few nodes
	// remain for a quorum, only the probes go out.
	skip, probes := b.pending.blocked(req.Key, owner)
	ask := b.all &^ skip
	if count(ask) < b.quorum {
		ask = 0
	}
	if probes != 0 {
		b.pending.begin(req.Key, owner, probes)
	}
	fo := b.fan(ctx, b.timeout(ttl), ask|probes, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		if ask&(1<<i) == 0 {
			b.probe(ctx, rdb, k, req.Key, owner, i)
			return reply{node: i, err: errPending}
		}
		acquire := redisnode.Acquire
		if req.Reentry != "" {
			acquire = func(ctx context.Context, c redis.Scripter, k redisnode.Keys, owner string, ttl time.Duration, desc string) (uint64, time.Duration, error) {
				return redisnode.AcquireReentrant(ctx, c, k, owner, ttl, desc, req.Reentry)
			}
		}
		token, holderTTL, err := acquire(ctx, rdb, k, owner, ttl, desc)
		return reply{node: i, ok: err == nil && token > 0, token: token, ttl: holderTTL, err: err}
	})
	rs := make([]reply, len(b.nodes))
	waiting := ask
	granted, refused, failed := 0, 0, count(b.all&^ask)
	tolerated := len(b.nodes) - b.quorum // failures a quorum survives
	for waiting != 0 {
		if granted+count(waiting) < b.quorum {
			// No quorum. Stop as soon as the cause is known: too many
			// failures, or refusals with failures a quorum would survive
			// whatever the silent nodes turn out to be.
			if failed > tolerated || (refused > 0 && failed+count(waiting) <= tolerated) {
				break
			}
		}
		r, ok := fo.next()
		if !ok {
			failed += count(waiting) // silent past the timeout
			break
		}
		if waiting&(1<<r.node) == 0 {
			continue // a probe
		}
		waiting &^= 1 << r.node
		rs[r.node] = r
		switch {
		case r.ok:
			granted++
		case r.err == nil:
			refused++
		default:
			failed++
		}
	}
	fo.done()
	b.mark(rs, waiting, skip, fo.silence())
	for i := range rs {
		if ask == 0 && skip&(1<<i) == 0 {
			rs[i] = reply{node: i, err: errTooFew}
		}
	}

	if granted < b.quorum {
		b.abandon(ctx, k, req.Key, owner, rs, waiting, ask)
		if refused > 0 && failed <= tolerated {
			// The failed nodes alone would have left a quorum possible:
			// refusals decided it, so the lock is held (or being taken)
			// elsewhere.
			return driver.Grant{RetryAfter: minHolderTTL(rs)}, nil
		}
		return driver.Grant{}, b.quorumError("acquire", req.Key, rs)
	}
	token, agreed := fenceToken(rs)
	if !agreed {
		if err := b.fence(ctx, k, req, token, rs, start.Add(validFor), b.timeout(ttl)); err != nil {
			b.abandon(ctx, k, req.Key, owner, rs, waiting, ask)
			return driver.Grant{}, err
		}
	}
	if elapsed := b.now().Sub(start); elapsed >= validFor {
		b.abandon(ctx, k, req.Key, owner, rs, waiting, ask)
		return driver.Grant{}, fmt.Errorf("%w: %q: quorum took %v of a %v lease (drift allowance %v); released",
			ErrValidityExpired, req.Key, elapsed, ttl, ttl-validFor)
	}
	return driver.Grant{Acquired: true, Token: token, ValidFor: validFor}, nil
}

// probe sends a release of owner to node i, recorded with pending.begin,
// and records whether it ran. Once one has, any older release of the owner
// there, sent earlier, has had its chance to run too. (Strictly, two
// connections do not order requests: one held back in the network for
// longer than a whole attempt is the residual risk.)
func (b *Backend) probe(ctx context.Context, rdb redis.UniversalClient, k redisnode.Keys, key, owner string, i int) {
	_, err := redisnode.Release(ctx, rdb, k, owner)
	b.pending.end(key, owner, i, err == nil || neverSent(err))
}

// mark records an error for the nodes that gave no reply: those still
// waiting when the outcome was decided, and those skipped.
func (b *Backend) mark(rs []reply, waiting, skip uint64, silence error) {
	for i := range rs {
		switch bit := uint64(1) << i; {
		case waiting&bit != 0:
			rs[i] = reply{node: i, err: silence}
		case skip&bit != 0:
			rs[i] = reply{node: i, err: errPending}
		}
	}
}

// fenceToken returns the largest token among the granting nodes, and
// whether every granting node returned it.
func fenceToken(rs []reply) (token uint64, agreed bool) {
	for _, r := range rs {
		if r.ok && r.token > token {
			token = r.token
		}
	}
	agreed = true
	for _, r := range rs {
		if r.ok && r.token != token {
			agreed = false
		}
	}
	return token, agreed
}

func minHolderTTL(rs []reply) time.Duration {
	var least time.Duration
	for _, r := range rs {
		if !r.ok && r.err == nil && r.ttl > 0 && (least == 0 || r.ttl < least) {
			least = r.ttl
		}
	}
	return least
}

var errNotGranting = errors.New("did not grant the lock in this attempt")

// fence raises the counter of every node to at least token and waits until
// a quorum of the nodes that granted the lock confirm it, before deadline
// (the lease's validity) and within one node timeout.
//
// Only granting nodes count: their counter reached token while the lock key
// sat on them, so no later holder's key — made after this one left — can
// have been given a token at or below it there. A node that did not grant
// may already hold another owner's key, made before the seed with an older
// token, which that owner may still count when its next attempt succeeds.
func (b *Backend) fence(ctx context.Context, k redisnode.Keys, req driver.Request, token uint64, rs []reply, deadline time.Time, timeout time.Duration) error {
	key := req.Key
	remaining := deadline.Sub(b.now())
	if remaining <= 0 {
		return fmt.Errorf("%w: %q: no time left to confirm the fencing token", ErrValidityExpired, key)
	}
	var granting uint64
	for _, r := range rs {
		if r.ok {
			granting |= 1 << r.node
		}
	}
	fo := b.fan(ctx, min(timeout, remaining), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		n, err := redisnode.Seed(ctx, rdb, k, token, req.Reentry)
		return reply{node: i, ok: err == nil && n >= token, token: n, err: err}
	})
	fs := make([]reply, len(b.nodes))
	waiting := granting
	confirmed := 0
	for waiting != 0 && confirmed < b.quorum && confirmed+count(waiting) >= b.quorum {
		r, ok := fo.next()
		if !ok {
			break
		}
		if waiting&(1<<r.node) == 0 {
			continue // not a granting node: its counter proves nothing
		}
		waiting &^= 1 << r.node
		fs[r.node] = r
		if r.ok {
			confirmed++
		} else if r.err == nil {
			fs[r.node].err = fmt.Errorf("counter %d is below the token %d", r.token, token)
		}
	}
	fo.done()
	if confirmed >= b.quorum {
		return nil
	}
	b.mark(fs, waiting, 0, fo.silence())
	for i := range fs {
		if granting&(1<<i) == 0 {
			fs[i] = reply{node: i, err: errNotGranting}
		}
	}
	return b.quorumError("fence", key, fs)
}

// abandon releases the lock of a failed attempt on every node asked that may
// hold it: those that granted it, failed, or had not answered (late), detached
// from ctx, which may be what ended the attempt. It waits for the nodes that
// answered the attempt, not for the late ones.
//
// A release whose outcome is unknown may still run on its node later, and
// would then delete a grant that a later attempt of the same owner counted.
// Each node is therefore blocked for this owner (see pendingSet) until its
// release is known to have run, or never to have left this process.
func (b *Backend) abandon(ctx context.Context, k redisnode.Keys, key, owner string, rs []reply, late, asked uint64) {
	var targets uint64
	for _, r := range rs {
		if r.ok || r.err != nil {
			targets |= 1 << r.node
		}
	}
	targets &= asked
	if targets == 0 {
		return
	}
	b.pending.begin(key, owner, targets)
	fo := b.fan(context.WithoutCancel(ctx), b.releaseTimeout(), targets, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		b.probe(ctx, rdb, k, key, owner, i)
		return reply{node: i}
	})
	for waiting := targets &^ late; waiting != 0; {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
	}
	fo.done()
}

// neverSent reports whether err proves the request never reached the
// node: the connection could not even be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Refresh implements driver.Backend: compare-and-PEXPIRE on every master at
// once, successful when a quorum extended the lease within its validity
// (ttl - elapsed - drift > 0). It returns ttl - drift, counted from the
// start of the call, and driver.ErrNotHeld once enough nodes say the lock
// is not this owner's that no quorum can hold it. Nodes that lost the key
// (a restart, an eviction) while a quorum kept it get it back, with a fresh
// acquire, so that the lock again tolerates as many failures as it should.
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	key, owner := l.Key, l.Owner
	validFor, err := b.validity(ttl)
	if err != nil {
		return 0, err
	}
	start := b.now()
	k := b.keys.Get(key)
	skip, _ := b.pending.blocked(key, owner)
	fo := b.fan(ctx, b.timeout(ttl), b.all&^skip, b.quorum, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		ok, err := redisnode.Refresh(ctx, rdb, k, owner, ttl)
		return reply{node: i, ok: ok, err: err}
	})
	rs := make([]reply, len(b.nodes))
	waiting := b.all &^ skip
	held, lost := 0, uint64(0)
	for waiting != 0 && held < b.quorum && held+count(waiting) >= b.quorum {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
		rs[r.node] = r
		switch {
		case r.ok:
			held++
		case r.err == nil:
			lost |= 1 << r.node
		}
	}
	fo.done()
	if held >= b.quorum {
		if elapsed := b.now().Sub(start); elapsed >= validFor {
			return 0, fmt.Errorf("%w: %q: refresh took %v of a %v lease (drift allowance %v)",
				ErrValidityExpired, key, elapsed, ttl, ttl-validFor)
		}
		if lost != 0 {
			b.reseed(ctx, k, owner, ttl, lost)
		}
		return validFor, nil
	}
	if count(lost) > len(b.nodes)-b.quorum {
		return 0, driver.ErrNotHeld
	}
	b.mark(rs, waiting, skip, fo.silence())
	return 0, b.quorumError("refresh", key, rs)
}

// reseed takes the lock again on the nodes in lost, where it is free. It is
// best effort and bounded by one node timeout: the lease does not depend
// on it.
func (b *Backend) reseed(ctx context.Context, k redisnode.Keys, owner string, ttl time.Duration, lost uint64) {
	fo := b.fan(ctx, b.timeout(ttl), lost, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		token, _, err := redisnode.Acquire(ctx, rdb, k, owner, ttl, "")
		return reply{node: i, ok: token > 0, err: err}
	})
	for n := count(lost); n > 0; n-- {
		if _, ok := fo.next(); !ok {
			break
		}
	}
	fo.done()
}

// Release implements driver.Backend: compare-and-delete, and the wake-up of
// waiters, on every master at once. It waits for every node (at most one
// node timeout), returns nil if a quorum released the lock, a
// [*QuorumError] if failed nodes leave that unknown, and driver.ErrNotHeld
// if too few nodes held the lock for this owner to have held it. A release
// repeated after a lost reply finds the receipts of the first on the nodes
// and reports it again.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	key, owner := l.Key, l.Owner
	k := b.keys.Get(key)
	fo := b.fan(ctx, b.releaseTimeout(), b.all, len(b.nodes)+1, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		ok, err := redisnode.Release(ctx, rdb, k, owner)
		return reply{node: i, ok: ok, err: err}
	})
	rs := make([]reply, len(b.nodes))
	waiting := b.all
	released, notHeld := 0, 0
	for waiting != 0 {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
		rs[r.node] = r
		switch {
		case r.ok:
			released++
		case r.err == nil:
			notHeld++
		}
	}
	fo.done()
	b.pending.forget(key, owner)
	switch {
	case released >= b.quorum:
		return nil
	case notHeld > len(b.nodes)-b.quorum:
		return driver.ErrNotHeld
	}
	b.mark(rs, waiting, 0, fo.silence())
	return b.quorumError("release", key, rs)
}

// quorumError describes rs, the replies of an operation that missed its
// quorum.
func (b *Backend) quorumError(op, key string, rs []reply) *QuorumError {
	e := &QuorumError{Op: op, Key: key, Quorum: b.quorum, Nodes: make([]NodeResult, len(rs))}
	for i, r := range rs {
		nr := NodeResult{Addr: b.nodes[i].addr, Err: r.err}
		if r.err == errPending {
			if last := b.nodes[i].lastErr.Load(); last != nil {
				nr.Err = fmt.Errorf("%w; its last error: %w", errPending, *last)
			}
		}
		switch {
		case r.err == errPending || r.err == errTooFew || r.err == errNotWaited || r.err == errNotGranting:
			nr.Outcome = Skipped
		case r.err != nil:
			nr.Outcome = Failed
		case r.ok:
			nr.Outcome = Succeeded
		default:
			nr.Outcome = Refused
		}
		e.Nodes[i] = nr
	}
	if op == "watch" {
		e.Quorum = 1
	}
	return e
}

// Inspect implements driver.Backend. The lock is held when a quorum of the
// masters that answered hold it for the same owner; TTL is then how long
// that quorum lasts (the quorum-th longest TTL among them), and Token the
// holder's. Otherwise Token is the largest counter seen. It fails if fewer
// than a quorum answered.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(ctx); err != nil {
		return driver.Info{}, err
	}
	k := b.keys.Get(key)
	states := make([]redisnode.State, len(b.nodes))
	fo := b.fan(ctx, b.releaseTimeout(), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		st, err := redisnode.Inspect(ctx, rdb, k)
		states[i] = st // read only after the reply is received
		return reply{node: i, ok: err == nil, err: err}
	})
	rs := make([]reply, len(b.nodes))
	waiting := b.all
	answered := 0
	var info driver.Info
	owners := map[string][]int{}
	for waiting != 0 {
		r, ok := fo.next()
		if !ok {
			break
		}
		waiting &^= 1 << r.node
		rs[r.node] = r
		if !r.ok {
			continue
		}
		answered++
		st := states[r.node]
		info.Token = max(info.Token, st.Token)
		if st.Held {
			owners[st.Owner] = append(owners[st.Owner], r.node)
		}
	}
	fo.done()
	if answered < b.quorum {
		b.mark(rs, waiting, 0, fo.silence())
		return driver.Info{}, b.quorumError("inspect", key, rs)
	}
	for _, held := range owners {
		if len(held) < b.quorum {
			continue
		}
		ttls := make([]time.Duration, len(held))
		info.Token, info.Holds = 0, 0
		for j, i := range held {
			ttls[j] = states[i].TTL
			info.Token = max(info.Token, states[i].Token)
			info.Holds = max(info.Holds, states[i].Holds)
			if info.Meta == nil {
				info.Meta = states[i].Meta
			}
		}
		sortDesc(ttls)
		info.Held, info.TTL = true, ttls[b.quorum-1]
	}
	info.Warnings = b.warnings(ctx, k)
	return info, nil
}

func sortDesc(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] > d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// Close ends the backend's pub/sub connections, and closes the clients too
// if the backend was opened from a URL. Calling it again does nothing.
func (b *Backend) Close() error {
	if b == nil {
		return nil
	}
	b.closeOnce.Do(func() {
		if b.stop != nil {
			close(b.stop)
		}
		var errs []error
		for i := range b.nodes {
			n := &b.nodes[i]
			errs = append(errs, n.notify.Close())
			if b.ownsRDB {
				errs = append(errs, n.rdb.Close())
			}
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}
