package distlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// waitFor polls cond every millisecond until it holds, or fails t.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLineOneWaiterPerClient: while another client holds the lock, the
// goroutines of one client that wait for it ask the backend one at a
// time, and get it in the order they asked.
func TestLineOneWaiterPerClient(t *testing.T) {
	mem := memlock.New()
	other := distlock.New(mem, distlock.WithTTL(time.Minute))
	held, err := other.Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int64 // the attempts made on the backend
	b := &fault{Backend: mem, acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		attempts.Add(1)
		return next(ctx, req)
	}}
	c := distlock.New(b, distlock.WithTTL(time.Minute))
	const n = 6
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Mutex("k").Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Unlock(ctx)
		}()
		// The first asks the backend; each later one waits in line.
		waitFor(t, "the goroutine to queue", func() bool {
			return distlock.LinesHeld(c) == 1 && distlock.LineWaiting(c, "k") == i
		})
	}
	time.Sleep(200 * time.Millisecond) // the holder keeps the lock meanwhile
	if got := attempts.Load(); got > 4 {
		t.Errorf("%d goroutines waiting on a held lock made %d attempts in 200ms; want the first one's only (at most 4)", n, got)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, g := range order {
		if g != i {
			t.Fatalf("acquisitions in order %v; want the order of asking", order)
		}
	}
	if k := distlock.LinesHeld(c); k != 0 {
		t.Errorf("%d lines left after every Lock returned; want 0", k)
	}
}

// TestLineGiveUp: a goroutine whose context ends while it waits in line
// returns ErrNotObtained with the context's error, and the line goes on
// without it.
func TestLineGiveUp(t *testing.T) {
	mem := memlock.New()
	held, err := distlock.New(mem, distlock.WithTTL(time.Minute)).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := distlock.New(mem, distlock.WithTTL(time.Minute))
	first := make(chan error, 1)
	go func() {
		l, err := c.Mutex("k").Lock(context.Background())
		if err == nil {
			err = l.Unlock(context.Background())
		}
		first <- err
	}()
	waitFor(t, "the first waiter", func() bool { return distlock.LinesHeld(c) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Mutex("k").Lock(ctx)
	if !errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock given up in line: %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	if w := distlock.LineWaiting(c, "k"); w != 0 {
		t.Errorf("%d still waiting after giving up; want 0", w)
	}
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first waiter: %v", err)
	}
	if k := distlock.LinesHeld(c); k != 0 {
		t.Errorf("%d lines left; want 0", k)
	}
}

// TestLineChurn: goroutines that lock, unlock and give up at random leave
// no line behind and never overlap.
func TestLineChurn(t *testing.T) {
	c := distlock.New(memlock.New(), distlock.WithTTL(time.Minute))
	var (
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				d := time.Duration((i+j)%5) * 200 * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), d+100*time.Microsecond)
				l, err := c.Mutex("k").Lock(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, distlock.ErrNotObtained) {
						t.Error(err)
					}
					continue
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				time.Sleep(50 * time.Microsecond)
				inside.Add(-1)
				if err := l.Unlock(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if k := distlock.LinesHeld(c); k != 0 {
		t.Errorf("%d lines left; want 0", k)
	}
}

// TestLineNotForOtherKinds: fair and re-entrant mutexes, readers, writers
// and permits do not wait in line: while they wait on a held key, the
// client has no line.
func TestLineNotForOtherKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error)
		wait func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error)
	}{
		{"fair mutex",
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) { return c.Mutex("k").Lock(ctx) },
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) {
				return c.Mutex("k", distlock.WithFairness()).Lock(ctx)
			}},
		{"re-entrant mutex",
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) { return c.Mutex("k").Lock(ctx) },
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) {
				return c.Mutex("k", distlock.WithOwner(distlock.NewOwnerID())).Lock(ctx)
			}},
		{"reader",
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) { return c.RWMutex("k").Lock(ctx) },
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) {
				return c.RWMutex("k").RLock(ctx)
			}},
		{"writer",
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) { return c.RWMutex("k").Lock(ctx) },
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) { return c.RWMutex("k").Lock(ctx) }},
		{"permit",
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) {
				return c.Semaphore("k", 1).Acquire(ctx)
			},
			func(c *distlock.Client, ctx context.Context) (*distlock.Lock, error) {
				return c.Semaphore("k", 1).Acquire(ctx)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memlock.New()
			ctx := context.Background()
			held, err := tc.hold(distlock.New(mem, distlock.WithTTL(time.Minute)), ctx)
			if err != nil {
				t.Fatal(err)
			}
			c := distlock.New(mem, distlock.WithTTL(time.Minute))
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := tc.wait(c, wctx)
				done <- err
			}()
			lines := 0
			for {
				lines = max(lines, distlock.LinesHeld(c))
				select {
				case err := <-done:
					if !errors.Is(err, distlock.ErrNotObtained) {
						t.Fatalf("waiting on a held key: %v; want ErrNotObtained at the deadline", err)
					}
					if lines != 0 {
						t.Errorf("the client had a line while a %s waited; want none", tc.name)
					}
					_ = held.Unlock(ctx)
					return
				default:
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}
