package distlocktest

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// recorder is a testing.TB that records failures instead of reporting
// them, so the suite can be run against broken backends and be seen to
// fail. What it does not override (TempDir, Setenv...) goes to the test
// that runs it.
type recorder struct {
	testing.TB
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	msgs     []string
	cleanups []func()
}

func newRecorder(t testing.TB, name string) *recorder {
	r := &recorder{TB: t, name: name}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

func (r *recorder) Helper()                           {}
func (r *recorder) Name() string                      { return r.name }
func (r *recorder) Log(...any)                        {}
func (r *recorder) Logf(string, ...any)               {}
func (r *recorder) Output() io.Writer                 { return io.Discard }
func (r *recorder) Context() context.Context          { return r.ctx }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Fail()                             { r.fail("Fail") }
func (r *recorder) FailNow()                          { r.fail("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(...any)                       { r.SkipNow() }
func (r *recorder) Skipf(string, ...any)              { r.SkipNow() }
func (r *recorder) SkipNow()                          { r.fail("a check skipped itself"); runtime.Goexit() }
func (r *recorder) Skipped() bool                     { return false }

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runCheck runs one check against h with a recorder and returns it.
func runCheck(t testing.TB, name string, c check, h Harness) *recorder {
	r := newRecorder(t, name)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(r, h)
	}()
	<-done
	r.cancel()
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
	return r
}

func findCheck(t *testing.T, name string) check {
	t.Helper()
	for _, c := range allChecks() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no check named %q", name)
	return check{}
}

// broken wraps memlock and breaks one rule of the contract. It is also
// the proof that a wrapper embedding a Backend keeps every capability:
// the reference run below goes through it with nothing overridden.
type broken struct {
	*memlock.Backend
	caps    func(driver.Capabilities) driver.Capabilities
	acquire func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error)
	release func(b *broken, ctx context.Context, l driver.Lease) error
	refresh func(b *broken, ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error)
	watch   func(b *broken, ctx context.Context, key, owner string) (driver.Watch, error)
	inspect func(b *broken, ctx context.Context, key string) (driver.Info, error)
	list    func(b *broken, ctx context.Context, prefix string) ([]driver.KeyInfo, error)
	brk     func(b *broken, ctx context.Context, key string) (driver.Info, error)

	mu       sync.Mutex
	granted  map[driver.Lease]bool // leases this wrapper saw granted
	released map[driver.Lease]bool // ... and released
	holders  map[string][]string   // key -> the owners and identities it granted
}

func (b *broken) Capabilities() driver.Capabilities {
	if b.caps != nil {
		return b.caps(b.Backend.Capabilities())
	}
	return b.Backend.Capabilities()
}

func (b *broken) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	var (
		g   driver.Grant
		err error
	)
	if b.acquire != nil {
		g, err = b.acquire(b, ctx, req)
	} else {
		g, err = b.Backend.Acquire(ctx, req)
	}
	if g.Acquired {
		b.mu.Lock()
		b.granted[req.Lease] = true
		b.holders[req.Key] = append(b.holders[req.Key], req.Owner, req.Reentry)
		b.mu.Unlock()
	}
	return g, err
}

func (b *broken) Release(ctx context.Context, l driver.Lease) error {
	var err error
	if b.release != nil {
		err = b.release(b, ctx, l)
	} else {
		err = b.Backend.Release(ctx, l)
	}
	if err == nil {
		b.mu.Lock()
		b.released[l] = true
		b.mu.Unlock()
	}
	return err
}

func (b *broken) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if b.refresh != nil {
		return b.refresh(b, ctx, l, ttl)
	}
	return b.Backend.Refresh(ctx, l, ttl)
}

func (b *broken) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if b.watch != nil {
		return b.watch(b, ctx, key, owner)
	}
	return b.Backend.Watch(ctx, key, owner)
}

func (b *broken) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if b.inspect != nil {
		return b.inspect(b, ctx, key)
	}
	return b.Backend.Inspect(ctx, key)
}

func (b *broken) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if b.list != nil {
		return b.list(b, ctx, prefix)
	}
	return b.Backend.List(ctx, prefix)
}

func (b *broken) Break(ctx context.Context, key string) (driver.Info, error) {
	if b.brk != nil {
		return b.brk(b, ctx, key)
	}
	return b.Backend.Break(ctx, key)
}

// seen reports whether the wrapper granted l, or released it.
func (b *broken) seen(l driver.Lease) (granted, released bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.granted[l], b.released[l]
}

// silentWatch never fires.
type silentWatch struct{ c chan struct{} }

func (w silentWatch) C() <-chan struct{} { return w.c }
func (w silentWatch) Close() error       { return nil }

// apart moves the holdings of kind to keys of their own, so that they no
// longer see the other kinds on the same key.
func apart(kind driver.Kind) *broken {
	move := func(l driver.Lease) driver.Lease {
		if l.Kind == kind {
			l.Key += "\x00apart"
		}
		return l
	}
	return &broken{
		acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
			req.Lease = move(req.Lease)
			return b.Backend.Acquire(ctx, req)
		},
		release: func(b *broken, ctx context.Context, l driver.Lease) error {
			return b.Backend.Release(ctx, move(l))
		},
		refresh: func(b *broken, ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
			return b.Backend.Refresh(ctx, move(l), ttl)
		},
	}
}

// alterInfo returns a backend whose Inspect reports what f makes of the
// true answer for a held key.
func alterInfo(f func(*driver.Info)) *broken {
	return &broken{inspect: func(b *broken, ctx context.Context, key string) (driver.Info, error) {
		info, err := b.Backend.Inspect(ctx, key)
		if info.Held {
			f(&info)
		}
		return info, err
	}}
}

// brokenBackends lists backends that each break one rule, and the checks
// that must notice.
func brokenBackends() []struct {
	name   string
	b      func() *broken
	checks []string
} {
	return []struct {
		name   string
		b      func() *broken
		checks []string
	}{
		{
			name: "list ignores the prefix",
			b: func() *broken {
				return &broken{list: func(b *broken, ctx context.Context, _ string) ([]driver.KeyInfo, error) {
					return b.Backend.List(ctx, "")
				}}
			},
			checks: []string{"ListHeldKeys"},
		},
		{
			name: "list out of order",
			b: func() *broken {
				return &broken{list: func(b *broken, ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
					list, err := b.Backend.List(ctx, prefix)
					slices.Reverse(list)
					return list, err
				}}
			},
			checks: []string{"ListHeldKeys"},
		},
		{
			name: "break ends nothing",
			b: func() *broken {
				return &broken{brk: func(b *broken, ctx context.Context, key string) (driver.Info, error) {
					return b.Backend.Inspect(ctx, key)
				}}
			},
			checks: []string{"BreakFreesTheLock", "BreakEveryHolding"},
		},
		{
			name: "break does not say what it ended",
			b: func() *broken {
				return &broken{brk: func(b *broken, ctx context.Context, key string) (driver.Info, error) {
					_, err := b.Backend.Break(ctx, key)
					return driver.Info{}, err
				}}
			},
			checks: []string{"BreakFreesTheLock", "BreakEveryHolding"},
		},
		{
			name: "no mutual exclusion",
			b: func() *broken {
				n := uint64(0)
				var mu sync.Mutex
				return &broken{acquire: func(_ *broken, _ context.Context, req driver.Request) (driver.Grant, error) {
					mu.Lock()
					defer mu.Unlock()
					n++
					return driver.Grant{Acquired: true, Token: n, ValidFor: req.TTL}, nil
				}}
			},
			checks: []string{"MutualExclusion", "TryLockExclusive", "AcquireIsIdempotent"},
		},
		{
			name: "release without owner check",
			b: func() *broken {
				return &broken{release: func(b *broken, _ context.Context, l driver.Lease) error {
					b.Expire(l.Key)
					return nil
				}}
			},
			checks: []string{"NonHolderCannotReleaseOrRefresh", "ExpiryThenTakeover", "ReleaseIsIdempotent"},
		},
		{
			name: "refresh without owner check",
			b: func() *broken {
				return &broken{refresh: func(_ *broken, _ context.Context, _ driver.Lease, ttl time.Duration) (time.Duration, error) {
					return ttl, nil
				}}
			},
			checks: []string{"NonHolderCannotReleaseOrRefresh", "ForcedExpiryEndsHolder", "WatchdogKeepsLock"},
		},
		{
			name: "no expiry",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					ttl := req.TTL
					req.TTL = time.Hour
					g, err := b.Backend.Acquire(ctx, req)
					if g.Acquired {
						g.ValidFor = ttl
					}
					return g, err
				}}
			},
			checks: []string{"ExpiryThenTakeover"},
		},
		{
			name: "tokens do not increase",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					g, err := b.Backend.Acquire(ctx, req)
					if g.Acquired {
						g.Token = 7
					}
					return g, err
				}}
			},
			checks: []string{"TokensIncrease", "ExpiryThenTakeover", "ForcedExpiryEndsHolder"},
		},
		{
			name: "acquire not idempotent for its owner",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if granted, _ := b.seen(req.Lease); granted {
						return driver.Grant{RetryAfter: req.TTL}, nil
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"AcquireIsIdempotent", "SemaphoreOwnerChecks", "RWReadersShareWritersExclude", "ReentrantLostReplyAddsNoHold"},
		},
		{
			name: "a repeated release reports ErrNotHeld",
			b: func() *broken {
				return &broken{release: func(b *broken, ctx context.Context, l driver.Lease) error {
					if _, released := b.seen(l); released {
						return driver.ErrNotHeld
					}
					return b.Backend.Release(ctx, l)
				}}
			},
			checks: []string{"ReleaseIsIdempotent", "SemaphoreOwnerChecks", "RWReadersShareWritersExclude", "ReentrantLostReplyAddsNoHold"},
		},
		{
			name: "refresh does not extend",
			b: func() *broken {
				return &broken{refresh: func(b *broken, ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
					info, err := b.Backend.Inspect(ctx, l.Key)
					if err != nil {
						return 0, err
					}
					if !info.Held {
						return 0, driver.ErrNotHeld
					}
					return ttl, nil // claims success, changes nothing
				}}
			},
			checks: []string{"RefreshExtends", "WatchdogKeepsLock", "ReentrantRenewalCoversAllHolds"},
		},
		{
			name: "claims Notify, never notifies",
			b: func() *broken {
				return &broken{watch: func(*broken, context.Context, string, string) (driver.Watch, error) {
					return silentWatch{make(chan struct{})}, nil
				}}
			},
			checks: []string{"LockWakesPromptly", "FairReleaseWakesOnlyTheNext"},
		},
		{
			name: "does not claim Notify, but watches",
			b: func() *broken {
				return &broken{caps: func(c driver.Capabilities) driver.Capabilities {
					c.Notify = false
					return c
				}}
			},
			checks: []string{"CapabilitiesDeclared"},
		},
		{
			name: "claims fairness, ignores the queue",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Fair {
						req.Fair, req.Queue = false, 0
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"FairOrder", "FairNoQueueJumping"},
		},
		{
			name: "a release by an owner that holds nothing keeps its place and claim",
			b: func() *broken {
				return &broken{release: func(b *broken, ctx context.Context, l driver.Lease) error {
					if granted, _ := b.seen(l); !granted {
						return driver.ErrNotHeld
					}
					return b.Backend.Release(ctx, l)
				}}
			},
			checks: []string{"FairGiveUpFreesPlace", "FairNoQueueJumping", "RWWriterGivingUpLetsReadersIn"},
		},
		{
			name: "a fair release wakes every waiter",
			b: func() *broken {
				return &broken{watch: func(b *broken, ctx context.Context, key, _ string) (driver.Watch, error) {
					return b.Backend.Watch(ctx, key, "")
				}}
			},
			checks: []string{"FairReleaseWakesOnlyTheNext"},
		},
		{
			name: "fair waiters are never woken",
			b: func() *broken {
				return &broken{watch: func(b *broken, ctx context.Context, key, owner string) (driver.Watch, error) {
					if owner != "" {
						return silentWatch{make(chan struct{})}, nil
					}
					return b.Backend.Watch(ctx, key, owner)
				}}
			},
			checks: []string{"FairReleaseWakesOnlyTheNext"},
		},
		{
			name: "a semaphore that ignores its count",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					req.Limit += 100
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"SemaphorePermits", "SemaphoreBoundsConcurrency", "SemaphoreOwnerChecks"},
		},
		{
			name: "a permit given back by anyone",
			b: func() *broken {
				return &broken{release: func(b *broken, ctx context.Context, l driver.Lease) error {
					if l.Kind != driver.Permit {
						return b.Backend.Release(ctx, l)
					}
					b.Expire(l.Key)
					return nil
				}}
			},
			checks: []string{"SemaphoreOwnerChecks", "SemaphorePermitExpires"},
		},
		{
			name:   "a writer that ignores readers",
			b:      func() *broken { return apart(driver.Write) },
			checks: []string{"RWReadersShareWritersExclude", "InspectReaders"},
		},
		{
			name:   "readers that ignore writers",
			b:      func() *broken { return apart(driver.Read) },
			checks: []string{"RWReadersShareWritersExclude", "RWWaitingWriterHoldsReadersOff", "InspectReaders"},
		},
		{
			name: "read leases that never expire",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					ttl := req.TTL
					if req.Kind == driver.Read {
						req.TTL = time.Hour
					}
					g, err := b.Backend.Acquire(ctx, req)
					if g.Acquired {
						g.ValidFor = ttl
					}
					return g, err
				}}
			},
			checks: []string{"RWReadLeaseExpires"},
		},
		{
			name: "no writer preference",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Kind == driver.Write {
						req.Queue = 0
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"RWWaitingWriterHoldsReadersOff"},
		},
		{
			name: "claims Reentrant, ignores the identity",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					req.Reentry = ""
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"ReentrantNestedHolds", "ReentrantRenewalCoversAllHolds", "ReentrantHoldNeverShortensLease", "ReentrantLostReplyAddsNoHold"},
		},
		{
			name: "a re-entrant lock that lets other identities in",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Reentry != "" {
						req.Reentry = "everyone"
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"ReentrantNestedHolds"},
		},
		{
			name: "a repeated nested acquisition adds a hold",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if granted, _ := b.seen(req.Lease); granted && req.Reentry != "" {
						req.Owner += "'" // counted as a new hold, released by no one
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"ReentrantLostReplyAddsNoHold"},
		},
		{
			name: "renewing a lease of several holds renews nothing",
			b: func() *broken {
				return &broken{refresh: func(b *broken, ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
					if info, err := b.Backend.Inspect(ctx, l.Key); err == nil && info.Holds > 1 {
						return ttl, nil
					}
					return b.Backend.Refresh(ctx, l, ttl)
				}}
			},
			checks: []string{"ReentrantRenewalCoversAllHolds"},
		},
		{
			name: "a nested hold cuts the lease to its TTL",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					held, _ := b.Backend.Inspect(ctx, req.Key)
					g, err := b.Backend.Acquire(ctx, req)
					if g.Acquired && held.Held {
						time.AfterFunc(req.TTL, func() { b.Expire(req.Key) })
					}
					return g, err
				}}
			},
			checks: []string{"ReentrantHoldNeverShortensLease"},
		},
		{
			name: "Inspect shows the holders' secrets",
			b: func() *broken {
				return &broken{inspect: func(b *broken, ctx context.Context, key string) (driver.Info, error) {
					info, err := b.Backend.Inspect(ctx, key)
					b.mu.Lock()
					defer b.mu.Unlock()
					if holders := b.holders[key]; info.Held && len(holders) >= 2 {
						info.Meta["owner"], info.Meta["reentry"] = holders[len(holders)-2], holders[len(holders)-1]
					}
					return info, err
				}}
			},
			checks: []string{"InspectNeverShowsOwners"},
		},
		{
			name: "every key is one lock",
			b: func() *broken {
				one := func(l driver.Lease) driver.Lease { l.Key = "one"; return l }
				return &broken{
					acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
						req.Lease = one(req.Lease)
						return b.Backend.Acquire(ctx, req)
					},
					release: func(b *broken, ctx context.Context, l driver.Lease) error {
						return b.Backend.Release(ctx, one(l))
					},
				}
			},
			checks: []string{"KeysIndependent"},
		},
		{
			name:   "Inspect reports another token",
			b:      func() *broken { return alterInfo(func(i *driver.Info) { i.Token++ }) },
			checks: []string{"InspectFreeAndHeld", "InspectReaders", "InspectPermits", "ReentrantNestedHolds"},
		},
		{
			name:   "Inspect reports a longer lease than granted",
			b:      func() *broken { return alterInfo(func(i *driver.Info) { i.TTL += time.Minute }) },
			checks: []string{"InspectFreeAndHeld", "InspectReaders", "InspectPermits"},
		},
		{
			name:   "Inspect counts one hold",
			b:      func() *broken { return alterInfo(func(i *driver.Info) { i.Holds = 1 }) },
			checks: []string{"InspectReaders", "InspectPermits", "ReentrantNestedHolds", "ReentrantLostReplyAddsNoHold"},
		},
		{
			name:   "Inspect forgets the metadata",
			b:      func() *broken { return alterInfo(func(i *driver.Info) { i.Meta = nil }) },
			checks: []string{"InspectFreeAndHeld"},
		},
		{
			name: "re-entrant locks ignore fairness",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Reentry != "" {
						req.Fair, req.Queue = false, 0
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"ReentrantFair"},
		},
		{
			name:   "semaphores do not see the other kinds",
			b:      func() *broken { return apart(driver.Permit) },
			checks: []string{"KindsExclude", "KindsRace"},
		},
		{
			name: "a semaphore's size is not part of the key",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Kind == driver.Permit {
						req.Key += fmt.Sprintf("\x00%d", req.Limit)
					}
					return b.Backend.Acquire(ctx, req)
				}, release: func(b *broken, ctx context.Context, l driver.Lease) error {
					err := b.Backend.Release(ctx, l)
					for n := range 4 {
						if l.Kind == driver.Permit {
							k := l
							k.Key += fmt.Sprintf("\x00%d", n)
							if e := b.Backend.Release(ctx, k); e == nil {
								err = nil
							}
						}
					}
					return err
				}}
			},
			checks: []string{"KindsExclude"},
		},
		{
			name: "a key's watch outlives it",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					_, _ = b.Backend.Watch(ctx, req.Key, "") // never closed
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"StateReclaimed"},
		},
		{
			name: "a lease without a TTL granted as a minute's",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.TTL <= 0 {
						req.TTL = time.Minute
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name: "a refusal that leaves the key's state behind",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.TTL <= 0 {
						req.TTL = time.Minute
						if _, err := b.Backend.Acquire(ctx, req); err != nil {
							return driver.Grant{}, err
						}
						_ = b.Backend.Release(ctx, req.Lease)
						return driver.Grant{}, fmt.Errorf("TTL %v: %w", req.TTL, driver.ErrInvalidRequest)
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name: "a panic on an unknown kind",
			b: func() *broken {
				return &broken{acquire: func(b *broken, ctx context.Context, req driver.Request) (driver.Grant, error) {
					if req.Kind > driver.Permit {
						panic(fmt.Sprintf("unknown kind %d", req.Kind))
					}
					return b.Backend.Acquire(ctx, req)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name: "a release of an unknown kind ends the holding",
			b: func() *broken {
				return &broken{release: func(b *broken, ctx context.Context, l driver.Lease) error {
					l.Kind = min(l.Kind, driver.Permit)
					return b.Backend.Release(ctx, l)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name: "Inspect of an empty key describes a free key",
			b: func() *broken {
				return &broken{inspect: func(b *broken, ctx context.Context, key string) (driver.Info, error) {
					if key == "" {
						return driver.Info{}, nil
					}
					return b.Backend.Inspect(ctx, key)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name: "a refusal that waits for the context",
			b: func() *broken {
				return &broken{refresh: func(b *broken, ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
					if ttl <= 0 {
						<-ctx.Done()
						return 0, ctx.Err()
					}
					return b.Backend.Refresh(ctx, l, ttl)
				}}
			},
			checks: []string{"InvalidRequest"},
		},
		{
			name:   "Inspect reports every lock as a mutex",
			b:      func() *broken { return alterInfo(func(i *driver.Info) { i.Kind = driver.Exclusive }) },
			checks: []string{"InspectReaders", "InspectPermits"},
		},
	}
}

// harnessOf returns a harness on b, with a fresh memlock inside, so that
// one broken rule leaves nothing behind for the next check.
func harnessOf(b *broken) Harness {
	b.Backend = memlock.New()
	b.granted = make(map[driver.Lease]bool)
	b.released = make(map[driver.Lease]bool)
	b.holders = make(map[string][]string)
	return Harness{
		NewBackend: func(testing.TB) driver.Backend { return b },
		Expire:     func(_ testing.TB, key string) { b.Expire(key) },
		Stored:     func(_ testing.TB, prefix string) []string { return b.Backend.Stored(prefix) },
		TTL:        500 * time.Millisecond,
	}
}

// TestSuiteDetectsBrokenBackends proves the suite can fail: each broken
// backend violates one rule, and the checks named for it must report it.
func TestSuiteDetectsBrokenBackends(t *testing.T) {
	for _, tc := range brokenBackends() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, name := range tc.checks {
				r := runCheck(t, t.Name()+"/"+name, findCheck(t, name), harnessOf(tc.b()))
				if !r.Failed() {
					t.Errorf("check %s passed against a backend with %s; it must fail", name, tc.name)
				} else {
					t.Logf("check %s failed as it must: %v", name, r.msgs[0])
				}
			}
		})
	}
}

// TestSuitePassesOnReference guards the self-test: with nothing broken,
// the same runner reports no failure, through the same wrapper (which
// embeds memlock and so keeps all its capabilities), so the failures above
// are the backends' and not the runner's.
func TestSuitePassesOnReference(t *testing.T) {
	h := harnessOf(&broken{})
	if caps := h.NewBackend(t).Capabilities(); caps != memlock.New().Capabilities() {
		t.Fatalf("the wrapper claims %+v; memlock %+v", caps, memlock.New().Capabilities())
	}
	for _, c := range allChecks() {
		if r := runCheck(t, t.Name()+"/"+c.name, c, h); r.Failed() {
			t.Errorf("check %s failed on memlock: %v", c.name, r.msgs)
		}
	}
}

// TestEveryCheckCanFail: each check of the suite is shown failing by at
// least one broken backend.
func TestEveryCheckCanFail(t *testing.T) {
	caught := map[string]bool{}
	for _, tc := range brokenBackends() {
		for _, name := range tc.checks {
			caught[name] = true
		}
	}
	for _, c := range allChecks() {
		if !caught[c.name] && !canFailUntested[c.name] {
			t.Errorf("no broken backend shows check %s failing", c.name)
		}
	}
}

// canFailUntested are the checks whose failures need a backend the
// self-test cannot build from memlock: they check the root package's
// handling more than the backend.
var canFailUntested = map[string]bool{
	"CancelWhileWaiting":         true,
	"UnlockTwice":                true,
	"UnlockWithCancelledContext": true,
	"InvalidInput":               true,
}
