// Package gocronlock runs gocron v2 jobs under distlock: a [Locker] makes
// each run of a job take a lock on the job's name, so that schedulers on
// several machines run each tick once, and an [Elector] lets only the
// leader of an election schedule jobs at all. Any distlock backend works.
//
//	c := distlock.New(redislock.New(rdb))
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(gocronlock.NewLocker(c)))
//
// # Ticks that run once
//
// gocron asks the locker for a lock on every tick of every scheduler, and
// releases it when the run ends. A run that ends sooner than the
// schedulers' clocks disagree would let a scheduler whose clock is behind
// take the freed lock and run the same tick again. A lock of this package
// therefore outlives its run by [WithMinHold]: at the release, the lease
// is set to end that long after the lock was taken (see
// distlock.Lock.UnlockAt) rather than deleted. Set it above the clock skew
// between the schedulers' hosts and below the job's interval.
//
// # Leases
//
// A lock is a lease, renewed while the run lasts; gocron cannot stop a run
// whose lease was lost. A job that writes to other systems should take its
// own lock with distlock and pass the fencing token on (package fence).
package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock-go/distlock"
)

// DefaultMinHold is how long a lock outlives the start of its run unless
// [WithMinHold] says otherwise.
const DefaultMinHold = time.Second

// Option configures a [Locker] or an [Elector].
type Option func(*config)

type config struct {
	prefix  string
	minHold time.Duration
	opts    []distlock.Option
	err     error
}

// WithKeyPrefix prefixes every job name to make the lock's key (default
// "gocron:"), so that the jobs' locks do not collide with others.
func WithKeyPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithMinHold sets how long after it was taken a job's lock is kept at
// least, however soon its run ends (default [DefaultMinHold]). Zero
// releases the lock as soon as the run ends.
func WithMinHold(d time.Duration) Option {
	return func(c *config) {
		if d < 0 && c.err == nil {
			c.err = fmt.Errorf("%w: minimum hold %v is negative", distlock.ErrInvalidArgument, d)
		}
		c.minHold = d
	}
}

// WithLockOptions passes options to every lock (distlock.WithTTL, say).
func WithLockOptions(opts ...distlock.Option) Option {
	return func(c *config) { c.opts = append(c.opts, opts...) }
}

func newConfig(opts []Option) config {
	c := config{prefix: "gocron:", minHold: DefaultMinHold}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Locker is a gocron.Locker: a job's run takes the lock named by the
// prefix and the job's name, with one attempt; a run whose lock is held
// elsewhere is skipped on this scheduler.
type Locker struct {
	c   *distlock.Client
	cfg config
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker that takes its locks from c.
func NewLocker(c *distlock.Client, opts ...Option) *Locker {
	return &Locker{c: c, cfg: newConfig(opts)}
}

// Lock implements gocron.Locker. It returns an error wrapping
// distlock.ErrNotObtained when another scheduler runs the job.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if l.cfg.err != nil {
		return nil, l.cfg.err
	}
	taken := time.Now()
	lock, err := l.c.Mutex(l.cfg.prefix+key, l.cfg.opts...).TryLock(ctx)
	if err != nil {
		return nil, err
	}
	return &runLock{l: lock, until: taken.Add(l.cfg.minHold)}, nil
}

// runLock is the lock of one run.
type runLock struct {
	l     *distlock.Lock
	until time.Time
}

// Unlock lets the lock lapse at the run's minimum hold, or releases it if
// that has passed.
func (r *runLock) Unlock(ctx context.Context) error {
	return r.l.UnlockAt(ctx, r.until)
}

// Lock returns the distlock handle behind a gocron.Lock made by a [Locker],
// for its fencing token and loss signal, or nil for another Lock.
func Lock(l gocron.Lock) *distlock.Lock {
	if r, ok := l.(*runLock); ok {
		return r.l
	}
	return nil
}

// ErrNotLeader is what [Elector.IsLeader] returns on a scheduler that
// does not lead.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// Elector is a gocron.Elector: the schedulers campaign in a distlock
// election, and only the leader's jobs run.
type Elector struct {
	e    *distlock.Election
	stop context.CancelFunc
	done chan error
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector campaigns in the election named key (prefixed as by
// [WithKeyPrefix]) until ctx ends or [Elector.Close] is called. The
// election runs in the background.
func NewElector(ctx context.Context, c *distlock.Client, key string, opts ...Option) (*Elector, error) {
	cfg := newConfig(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	ctx, stop := context.WithCancel(ctx)
	e := &Elector{e: c.Election(cfg.prefix+key, cfg.opts...), stop: stop, done: make(chan error, 1)}
	go func() {
		e.done <- e.e.Run(ctx, func(ctx context.Context, _ *distlock.Lock) error {
			<-ctx.Done() // lead until stopped or the lease is lost
			return ctx.Err()
		})
	}()
	return e, nil
}

// IsLeader implements gocron.Elector: nil while this scheduler leads,
// else ErrNotLeader. Until the first campaign has an outcome it waits for
// it, as long as ctx allows.
func (e *Elector) IsLeader(ctx context.Context) error {
	select {
	case <-e.e.Campaigned():
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotLeader, ctx.Err())
	}
	if e.e.Leading() {
		return nil
	}
	select {
	case err := <-e.done: // the campaign ended: say why
		e.done <- err
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
	default:
	}
	return ErrNotLeader
}

// Close ends the campaign, resigning if this scheduler leads, and returns
// the election's error (nil when it ended by Close).
func (e *Elector) Close() error {
	e.stop()
	err := <-e.done
	e.done <- err
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
