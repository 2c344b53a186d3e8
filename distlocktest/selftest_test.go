package distlocktest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// recorder is a TB that records failures instead of reporting them, so the
// suite can be run against broken backends and must be seen to fail.
type recorder struct {
	name     string
	mu       sync.Mutex
	failed   bool
	msgs     []string
	cleanups []func()
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(string, ...any) {
}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
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
func runCheck(name string, c check, h Harness) *recorder {
	r := &recorder{name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(r, h)
	}()
	<-done
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
	return r
}

func allChecks() []check {
	all := append(checks[:len(checks):len(checks)], fairChecks...)
	all = append(all, rwChecks...)
	return append(all, semaphoreChecks...)
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

// broken wraps memlock and breaks one rule of the contract.
type broken struct {
	*memlock.Backend
	acquire  func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error)
	release  func(b *memlock.Backend, ctx context.Context, key, owner string) error
	refresh  func(b *memlock.Backend, ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error)
	watch    func(b *memlock.Backend, ctx context.Context, key string) (driver.Watch, error)
	leave    func(b *memlock.Backend, ctx context.Context, key, owner string) error
	permit   func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest, n int) (driver.Grant, error)
	releaseP func(b *memlock.Backend, ctx context.Context, key, owner string) error
	shared   func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error)
	excl     func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error)
}

func (b *broken) AcquireShared(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if b.shared != nil {
		return b.shared(b.Backend, ctx, req)
	}
	return b.Backend.AcquireShared(ctx, req)
}

func (b *broken) AcquireExclusive(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if b.excl != nil {
		return b.excl(b.Backend, ctx, req)
	}
	return b.Backend.AcquireExclusive(ctx, req)
}

func (b *broken) AcquirePermit(ctx context.Context, req driver.AcquireRequest, n int) (driver.Grant, error) {
	if b.permit != nil {
		return b.permit(b.Backend, ctx, req, n)
	}
	return b.Backend.AcquirePermit(ctx, req, n)
}

func (b *broken) ReleasePermit(ctx context.Context, key, owner string) error {
	if b.releaseP != nil {
		return b.releaseP(b.Backend, ctx, key, owner)
	}
	return b.Backend.ReleasePermit(ctx, key, owner)
}

func (b *broken) Leave(ctx context.Context, key, owner string) error {
	if b.leave != nil {
		return b.leave(b.Backend, ctx, key, owner)
	}
	return b.Backend.Leave(ctx, key, owner)
}

func (b *broken) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	if b.acquire != nil {
		return b.acquire(b.Backend, ctx, req)
	}
	return b.Backend.Acquire(ctx, req)
}

func (b *broken) Release(ctx context.Context, key, owner string) error {
	if b.release != nil {
		return b.release(b.Backend, ctx, key, owner)
	}
	return b.Backend.Release(ctx, key, owner)
}

func (b *broken) Refresh(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if b.refresh != nil {
		return b.refresh(b.Backend, ctx, key, owner, ttl)
	}
	return b.Backend.Refresh(ctx, key, owner, ttl)
}

func (b *broken) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if b.watch != nil {
		return b.watch(b.Backend, ctx, key)
	}
	return b.Backend.Watch(ctx, key)
}

// silentWatch never fires.
type silentWatch struct{ c chan struct{} }

func (w silentWatch) C() <-chan struct{} { return w.c }
func (w silentWatch) Close() error       { return nil }

// TestSuiteDetectsBrokenBackends proves the suite can fail: each broken
// backend violates one rule, and the checks named for it must report it.
func TestSuiteDetectsBrokenBackends(t *testing.T) {
	// The inner memlock is replaced per case so that "holder" state of one
	// broken rule does not leak into the next.
	var fences sync.Map // key -> owner, for the forgetful release
	cases := []struct {
		name   string
		b      func() *broken
		checks []string
	}{
		{
			name: "no mutual exclusion",
			b: func() *broken {
				n := uint64(0)
				var mu sync.Mutex
				return &broken{acquire: func(_ *memlock.Backend, _ context.Context, req driver.AcquireRequest) (driver.Grant, error) {
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
				return &broken{release: func(b *memlock.Backend, ctx context.Context, key, owner string) error {
					b.Expire(key)
					return nil
				}}
			},
			checks: []string{"NonHolderCannotReleaseOrRefresh", "ExpiryThenTakeover"},
		},
		{
			name: "refresh without owner check",
			b: func() *broken {
				return &broken{refresh: func(_ *memlock.Backend, _ context.Context, _, _ string, ttl time.Duration) (time.Duration, error) {
					return ttl, nil
				}}
			},
			checks: []string{"NonHolderCannotReleaseOrRefresh", "ForcedExpiryEndsHolder", "WatchdogKeepsLock"},
		},
		{
			name: "no expiry",
			b: func() *broken {
				return &broken{acquire: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					ttl := req.TTL
					req.TTL = time.Hour
					g, err := b.Acquire(ctx, req)
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
				return &broken{acquire: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					g, err := b.Acquire(ctx, req)
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
				return &broken{acquire: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					if _, seen := fences.LoadOrStore(req.Key+"\x00"+req.Owner, true); seen {
						return driver.Grant{RetryAfter: req.TTL}, nil
					}
					return b.Acquire(ctx, req)
				}}
			},
			checks: []string{"AcquireIsIdempotent"},
		},
		{
			name: "refresh does not extend",
			b: func() *broken {
				return &broken{refresh: func(b *memlock.Backend, ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
					info, err := b.Inspect(ctx, key)
					if err != nil {
						return 0, err
					}
					if !info.Held {
						return 0, driver.ErrNotHeld
					}
					return ttl, nil // claims success, changes nothing
				}}
			},
			checks: []string{"RefreshExtends", "WatchdogKeepsLock"},
		},
		{
			name: "claims notified wait, never notifies",
			b: func() *broken {
				return &broken{
					watch: func(*memlock.Backend, context.Context, string) (driver.Watch, error) {
						return silentWatch{make(chan struct{})}, nil
					},
				}
			},
			checks: []string{"LockWakesPromptly"},
		},
		{
			name: "claims fairness, ignores the queue",
			b: func() *broken {
				return &broken{acquire: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					req.Fair, req.Queue = false, 0
					return b.Acquire(ctx, req)
				}}
			},
			checks: []string{"FairOrder", "FairNoQueueJumping"},
		},
		{
			name: "a waiter that gives up keeps its place",
			b: func() *broken {
				return &broken{leave: func(*memlock.Backend, context.Context, string, string) error { return nil }}
			},
			checks: []string{"FairGiveUpFreesPlace"},
		},
		{
			name: "a semaphore that ignores its count",
			b: func() *broken {
				return &broken{permit: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest, n int) (driver.Grant, error) {
					return b.AcquirePermit(ctx, req, n+100)
				}}
			},
			checks: []string{"SemaphorePermits", "SemaphoreBoundsConcurrency", "SemaphoreOwnerChecks"},
		},
		{
			name: "a permit given back by anyone",
			b: func() *broken {
				return &broken{releaseP: func(b *memlock.Backend, ctx context.Context, key, owner string) error {
					b.ExpirePermits(key)
					return nil
				}}
			},
			checks: []string{"SemaphoreOwnerChecks", "SemaphorePermitExpires"},
		},
		{
			name: "a writer that ignores readers",
			b: func() *broken {
				return &broken{excl: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					return b.Acquire(ctx, req)
				}}
			},
			checks: []string{"RWReadersShareWritersExclude"},
		},
		{
			name: "read leases that never expire",
			b: func() *broken {
				return &broken{shared: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					ttl := req.TTL
					req.TTL = time.Hour
					g, err := b.AcquireShared(ctx, req)
					if g.Acquired {
						g.ValidFor = ttl
					}
					return g, err
				}}
			},
			checks: []string{"RWReadLeaseExpires"},
		},
		{
			name: "readers that ignore writers",
			b: func() *broken {
				return &broken{shared: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					req.Key += "\x00readers"
					return b.AcquireShared(ctx, req)
				}}
			},
			checks: []string{"RWReadersShareWritersExclude", "RWWaitingWriterHoldsReadersOff"},
		},
		{
			name: "no writer preference",
			b: func() *broken {
				return &broken{excl: func(b *memlock.Backend, ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
					req.Queue = 0
					return b.AcquireExclusive(ctx, req)
				}}
			},
			checks: []string{"RWWaitingWriterHoldsReadersOff"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, name := range tc.checks {
				b := tc.b()
				b.Backend = memlock.New()
				h := Harness{
					NewBackend: func(TB) driver.Backend { return b },
					Expire:     func(_ TB, key string) { b.Expire(key) },
					TTL:        100 * time.Millisecond,
				}
				r := runCheck(t.Name()+"/"+name, findCheck(t, name), h)
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
// the same runner reports no failure, so the failures above are the
// backends' and not the runner's.
func TestSuitePassesOnReference(t *testing.T) {
	b := memlock.New()
	h := Harness{
		NewBackend: func(TB) driver.Backend { return b },
		Expire:     func(_ TB, key string) { b.Expire(key) },
		TTL:        100 * time.Millisecond,
	}
	for _, c := range allChecks() {
		if r := runCheck(t.Name()+"/"+c.name, c, h); r.Failed() {
			t.Errorf("check %s failed on memlock: %v", c.name, r.msgs)
		}
	}
}
