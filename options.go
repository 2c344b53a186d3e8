package distlock

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Defaults and limits of the options.
const (
	// DefaultTTL is the lease length when no [WithTTL] is given.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest accepted lease: below it a renewal cannot
	// reliably complete before the lease ends.
	MinTTL = 10 * time.Millisecond

	// DefaultReleaseTimeout bounds how long a release is repeated while
	// its outcome is unknown (see [Lock.Unlock]).
	DefaultReleaseTimeout = 5 * time.Second

	// MaxKeyLen is the longest accepted key, in bytes: the contract's
	// [driver.MaxKeyLen].
	MaxKeyLen = driver.MaxKeyLen
)

// defaultSafetyPoll bounds the sleep of a notified waiter, in case a
// notification is lost (a reconnect, a missed message).
const defaultSafetyPoll = time.Second

// defaultBackoff polls from 1ms up to 250ms when the backend cannot notify.
var defaultBackoff = ExponentialBackoff(time.Millisecond, 250*time.Millisecond)

// An Option configures a [Client] (as the default for all its locks) or one
// [Mutex]. Options given to [Client.Mutex] override the client's.
type Option func(*options)

type options struct {
	ttl             time.Duration
	autoRefresh     bool
	refreshInterval time.Duration // 0: a third of the validity; never more
	backoff         Backoff
	safetyPoll      time.Duration
	releaseTimeout  time.Duration
	meta            map[string]string
	fair            bool
	owner           OwnerID // re-entrant identity of a Mutex; zero: none
	observers       []Observer
	logger          *slog.Logger
	err             error // first invalid option, reported by Lock and TryLock
}

func defaultOptions() options {
	return options{
		ttl:            DefaultTTL,
		autoRefresh:    true,
		backoff:        defaultBackoff,
		safetyPoll:     defaultSafetyPoll,
		releaseTimeout: DefaultReleaseTimeout,
		meta:           processMeta(),
	}
}

func (o *options) invalid(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
	}
}

// WithTTL sets the lease length (default [DefaultTTL]). The lease is renewed
// every third of its validity (ttl less the backend's drift allowance) while
// the lock is held, unless [WithoutAutoRefresh] is given,
// so a short TTL means a crashed holder blocks others only briefly, at the
// cost of more renewals. A TTL below [MinTTL] makes Lock and TryLock fail
// with [ErrInvalidTTL].
func WithTTL(ttl time.Duration) Option {
	return func(o *options) { o.ttl = ttl }
}

// WithoutAutoRefresh turns off the watchdog. The lease then ends at
// [Lock.ValidUntil] unless the holder calls [Lock.Refresh] in time.
func WithoutAutoRefresh() Option {
	return func(o *options) { o.autoRefresh = false }
}

// WithRefreshInterval makes the watchdog renew the lease more often than
// its default: a third of the validity the last grant or renewal confirmed
// (the TTL less the backend's drift allowance, and for multi-node backends
// less the round's duration). A longer interval is shortened to that third,
// so that a renewal is always due well before [Lock.ValidUntil], with time
// for two more attempts. d must be positive and shorter than the TTL, or
// Lock fails with [ErrInvalidArgument].
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.invalid("refresh interval %v is not positive", d)
			return
		}
		o.refreshInterval = d
	}
}

// WithBackoff sets the polling policy of [Mutex.Lock] for backends that
// cannot notify waiters (default: exponential from 1ms to 250ms with
// jitter). Sleeps are always capped at the holder's remaining lease when the
// backend reports it. A nil Backoff is an error.
func WithBackoff(b Backoff) Option {
	return func(o *options) {
		if b == nil {
			o.invalid("nil Backoff")
			return
		}
		o.backoff = b
	}
}

// WithSafetyPoll sets how long a notified waiter sleeps at most before it
// re-tries on its own, in case a wake-up was lost (default 1s).
func WithSafetyPoll(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.invalid("safety poll %v is not positive", d)
			return
		}
		o.safetyPoll = d
	}
}

// WithReleaseTimeout bounds how long a release is repeated while its
// outcome is unknown (default [DefaultReleaseTimeout]): [Lock.Unlock], and
// the give-back of an attempt whose reply was lost, run detached from
// their context, for this long or until the context's deadline, whichever
// is later.
func WithReleaseTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.invalid("release timeout %v is not positive", d)
			return
		}
		o.releaseTimeout = d
	}
}

// WithFairness makes the lock first-come, first-served: [Mutex.Lock] joins
// the key's queue of waiters and is granted the lock in turn, so no waiter
// starves and waits are bounded by the queue ahead; [Mutex.TryLock] does
// not jump the queue. Every client locking the key must use it: a client
// without it ignores the queue. Fairness costs throughput (no barging by
// the last holder). Backends that cannot queue (see driver.Capabilities)
// make Lock and TryLock fail with an error wrapping errors.ErrUnsupported.
func WithFairness() Option {
	return func(o *options) { o.fair = true }
}

// WithOwner makes a [Mutex] re-entrant for id: see [OwnerID]. It takes
// precedence over an identity carried by the context. Given to an
// [RWMutex] or a [Semaphore], or on a backend without re-entrant locks, it
// makes locking fail with an error wrapping errors.ErrUnsupported; a zero
// id makes it fail with [ErrInvalidArgument].
func WithOwner(id OwnerID) Option {
	return func(o *options) {
		if id.IsZero() {
			o.invalid("zero OwnerID")
			return
		}
		o.owner = id
	}
}

// WithMetadata adds descriptive fields stored with the lock by backends that
// can (inspection tools show them). "host" and "pid" are set by default.
func WithMetadata(kv map[string]string) Option {
	return func(o *options) {
		m := maps.Clone(o.meta)
		if m == nil {
			m = make(map[string]string, len(kv))
		}
		maps.Copy(m, kv)
		o.meta = m
	}
}

// processMeta describes this process; computed once, shared read-only.
var processMeta = sync.OnceValue(func() map[string]string {
	host, _ := os.Hostname()
	return map[string]string{"host": host, "pid": strconv.Itoa(os.Getpid())}
})

func (o *options) validate(key string) error {
	if o.err != nil {
		return o.err
	}
	if err := validKey(key); err != nil {
		return err
	}
	return validTTL(o.ttl, o)
}

func validKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

func validTTL(ttl time.Duration, o *options) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: %v (minimum %v)", ErrInvalidTTL, ttl, MinTTL)
	}
	if o != nil && o.autoRefresh && o.refreshInterval >= ttl {
		return fmt.Errorf("%w: refresh interval %v is not shorter than the TTL %v", ErrInvalidArgument, o.refreshInterval, ttl)
	}
	return nil
}
