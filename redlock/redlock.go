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

// MaxDefaultNodeTimeout bounds [DefaultNodeTimeout].
const MaxDefaultNodeTimeout = time.Second

// DefaultNodeTimeout returns the per-node timeout of an acquisition or a
// renewal of a lease of length ttl unless [WithNodeTimeout] is given: a
// quarter of ttl, at most [MaxDefaultNodeTimeout].
//
// The timeout is how long an operation waits for a node that does not
// answer. A healthy master answers in well under a millisecond on a LAN,
// but a loaded machine (busy CPUs on the client or the master, a fork for
// a snapshot, an fsync) delays a reply by tens or hundreds of
// milliseconds, so a node is given far longer than its usual round trip
// before it counts as failed. The time an acquisition takes comes off the
// lease: it waits at most one timeout for the vote and one for the fencing
// write-back, so about half of the TTL is left at worst, less the drift
// allowance; a renewal, sent a third of the way into the lease, has time
// for two. Operations stop waiting sooner whenever the remaining nodes can
// no longer change the outcome, so a dead node costs nothing and a paused
// one costs one timeout where its answer matters.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(ttl/4, MaxDefaultNodeTimeout)
}

// untimedWait bounds how long a call whose context has no deadline waits
// for a node, where the wait does not come off a lease (Break,
// DeclareFresh): the context is the caller's bound, this one stops a call
// given none from hanging on a stalled node.
const untimedWait = 5 * time.Second

// answerTimeout is how long an operation that holds no lease (Inspect)
// waits for each node unless [WithNodeTimeout] is given.
const answerTimeout = MaxDefaultNodeTimeout

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
	durable   bool
	clockOff  bool
	risks     []redisnode.RiskCache // per node
	opts      driver.OptionCheck    // the first invalid option or argument of New, if any
	pending   pendingSet
	watchMu   sync.Mutex
	watched   map[string]*watchers // by key: this backend's waiters (see gate)
	yields    redisnode.Yields     // the gate nodes' locks this client yields on
	stop      chan struct{}        // closed by Close: workers exit
	ownsRDB   bool                 // opened from a URL: Close closes the clients
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

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.FreshDeclarer = (*Backend)(nil)
)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key (default [DefaultPrefix]).
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithNodeTimeout sets how long an acquisition, a renewal or an Inspect
// waits for each node (default [DefaultNodeTimeout] of the lease's TTL;
// for Inspect, [MaxDefaultNodeTimeout]). Raise it when the masters are
// further apart than a few milliseconds; keep it small against the TTL,
// since the time an acquisition takes comes off the lease. A release,
// which spends no lease, waits for every node longer (see
// [Backend.Release]). A timeout that is not positive makes every call
// fail.
func WithNodeTimeout(d time.Duration) Option {
	return func(b *Backend) {
		if d <= 0 {
			b.opts.Invalid("redlock", fmt.Sprintf("WithNodeTimeout(%v)", d), "want a positive timeout")
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
			b.opts.Invalid("redlock", "WithDrift(nil)", "want a drift function")
			return
		}
		b.drift = f
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
// that says so, wrapping driver.ErrInvalidBackend.
func New(clients []redis.UniversalClient, opts ...Option) *Backend {
	b := &Backend{prefix: DefaultPrefix, drift: driver.DefaultDrift, now: time.Now, maxTTL: DefaultMaxTTL}
	for _, opt := range opts {
		if opt == nil {
			b.opts.Invalid("redlock", "New", "a nil Option")
			continue
		}
		opt(b)
	}
	if len(clients) > MaxNodes { // no clients: no nodes, see usable
		b.opts.Invalid("redlock", "New", fmt.Sprintf("%d clients; at most %d masters are supported", len(clients), MaxNodes))
	}
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			b.opts.Invalid("redlock", "New", fmt.Sprintf("client %d of %d is nil", i, len(clients)))
			continue
		}
		addr, known := addrOf(c, i)
		if j, dup := seen[addr]; dup && known {
			b.opts.Invalid("redlock", "New", fmt.Sprintf("clients %d and %d both connect to %s; Redlock needs independent masters", j, i, addr))
		}
		seen[addr] = i
		b.nodes = append(b.nodes, node{rdb: c, addr: addr})
	}
	if b.opts.Err() != nil || len(b.nodes) == 0 {
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

// usable reports whether b can serve calls: a backend that cannot (no
// nodes, an invalid option or argument of New; see [driver.OptionCheck])
// fails every call with an error wrapping driver.ErrInvalidBackend, which
// a waiting Lock does not retry.
func (b *Backend) usable() error {
	if b == nil {
		return ErrNoNodes
	}
	if err := b.opts.Err(); err != nil {
		return err
	}
	if len(b.nodes) == 0 { // no clients, or a Backend not made by New
		return ErrNoNodes
	}
	return nil
}

// check is usable for a call with ctx.
func (b *Backend) check(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	if ctx == nil {
		return errNilContext
	}
	return nil
}

// checkKey is check for a call given a key alone (Watch, Inspect), which
// must be a key the contract allows.
func (b *Backend) checkKey(ctx context.Context, key string) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := driver.ValidateKey(key); err != nil {
		return fmt.Errorf("redlock: %w", err)
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

// answerTimeout returns the per-node timeout of an operation that holds
// no lease.
func (b *Backend) answerTimeout() time.Duration {
	if b.nodeTimeout > 0 {
		return b.nodeTimeout
	}
	return answerTimeout
}

// releaseWait returns how long one Release waits for each node, unless its
// context ends first: as long as an acquisition of the longest lease would
// wait, and at least the node timeout set. The caller repeats a Release
// whose outcome is in doubt to wait longer.
func (b *Backend) releaseWait() time.Duration {
	return max(b.nodeTimeout, MaxDefaultNodeTimeout)
}

// untimed returns the per-node timeout, for fan, of an operation that
// waits for every node as long as ctx allows (see untimedWait).
func untimed(ctx context.Context) time.Duration {
	if _, ok := ctx.Deadline(); ok {
		return 0 // ctx's deadline bounds the wait
	}
	return untimedWait
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
