package distlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// fairChecks run for backends that claim Fair.
var fairChecks = []check{
	{"FairOrder", fair, testFairOrder},
	{"FairNoQueueJumping", fair, testFairNoQueueJumping},
	{"FairGiveUpFreesPlace", fair, testFairGiveUp},
	{"FairReleaseWakesOnlyTheNext", fairWakes, testFairWakesOne},
}

func testFairOrder(t testing.TB, h Harness) {
	key := uniqueKey(t)
	fair := distlock.WithFairness()
	holder := mustLock(t, newClient(t, h, fair).Mutex(key))
	const n = 5
	order := lineUp(t, n, func(_ int, queued distlock.Option) *distlock.Mutex {
		return newClient(t, h, fair, distlock.WithTTL(10*time.Second), queued).Mutex(key)
	})
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	var got []int
	for range n {
		i, ok := order.next(30 * time.Second)
		if !ok {
			t.Fatalf("fair waiters stuck; order so far %v", got)
		}
		got = append(got, i)
	}
	for i, w := range got {
		if w != i {
			t.Fatalf("fair waiters acquired in order %v; want the order they queued in", got)
		}
	}
}

// line is fair waiters started one after the other (see lineUp).
type line struct {
	t     testing.TB
	order chan int
	errs  chan error
}

// lineUp starts n waiters, the i-th locking the mutex waiter(i, queued)
// returns once the one before it is in line and watching; each holds the
// lock for a moment. The mutex must be made with the option queued, which
// observes the attempts.
func lineUp(t testing.TB, n int, waiter func(i int, queued distlock.Option) *distlock.Mutex) *line {
	ln := &line{t: t, order: make(chan int, n), errs: make(chan error, n)}
	for i := range n {
		// In line after its first refused attempt, and watching after the
		// second: a waiter tries again once its watch is in place.
		inLine := make(chan struct{})
		var refusals atomic.Int32
		queued := distlock.WithObserver(distlock.ObserverFunc(func(_ context.Context, e distlock.Event) {
			if e.Type == distlock.EventAttempt && e.Outcome == distlock.HeldByOther && refusals.Add(1) == 2 {
				close(inLine)
			}
		}))
		m := waiter(i, queued)
		go func() {
			l, err := m.Lock(timeout(t, 60*time.Second))
			if err != nil {
				ln.errs <- err
				return
			}
			ln.order <- i
			time.Sleep(20 * time.Millisecond)
			if err := l.Unlock(context.Background()); err != nil {
				ln.errs <- err
			}
		}()
		select {
		case <-inLine:
		case err := <-ln.errs:
			t.Fatalf("fair waiter %d: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("fair waiter %d made no second attempt in 30s: not in line", i)
		}
	}
	return ln
}

// next returns the next waiter to get the lock, within d; false if none
// did. A waiter's error ends the test.
func (ln *line) next(d time.Duration) (int, bool) {
	select {
	case i := <-ln.order:
		return i, true
	case err := <-ln.errs:
		ln.t.Fatalf("fair waiter: %v", err)
	case <-time.After(d):
	}
	return 0, false
}

// testFairNoQueueJumping works on the driver directly, so that the queued
// waiter provably has not retried when the others try. It also checks
// that Release takes a waiter that gives up out of the line.
func testFairNoQueueJumping(t testing.TB, h Harness) {
	key := uniqueKey(t)
	b := h.NewBackend(t)
	ctx := timeout(t, 10*time.Second)
	owners := map[string]driver.Lease{}
	lease := func(name string) driver.Lease {
		if _, ok := owners[name]; !ok {
			owners[name] = driver.Lease{Key: key, Owner: owner(name)}
		}
		return owners[name]
	}
	acquire := func(name string, queue time.Duration) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, driver.Request{Lease: lease(name), TTL: 10 * time.Second, Fair: true, Queue: queue})
		if err != nil {
			t.Fatalf("Acquire(%s): %v", name, err)
		}
		return g
	}
	release := func(name string) error { return b.Release(ctx, lease(name)) }
	defer func() {
		for _, l := range owners {
			_ = b.Release(context.Background(), l)
		}
	}()
	if !acquire("holder", 0).Acquired {
		t.Fatalf("first fair Acquire of a free key not granted")
	}
	if acquire("waiter", 10*time.Second).Acquired {
		t.Fatalf("fair Acquire of a held key granted")
	}
	if err := release("holder"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The key is free, but "waiter" queued first.
	if g := acquire("jumper", 0); g.Acquired {
		t.Errorf("a fair attempt that did not queue took the lock ahead of a queued waiter")
	}
	if g := acquire("latecomer", 10*time.Second); g.Acquired {
		t.Errorf("a later fair waiter took the lock ahead of the first")
	}
	if g := acquire("waiter", 10*time.Second); !g.Acquired {
		t.Fatalf("the first queued waiter was not granted the free lock")
	}
	if acquire("quitter", 10*time.Second).Acquired {
		t.Fatalf("fair Acquire of a held key granted")
	}
	if err := release("waiter"); err != nil {
		t.Errorf("Release: %v", err)
	}
	if !acquire("latecomer", 10*time.Second).Acquired {
		t.Errorf("the second queued waiter was not granted the lock after the first")
	}
	// "quitter" is next in line: it gives up, as a Lock whose ctx ended.
	if err := release("quitter"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release by a waiter in line that holds nothing: %v; want ErrNotHeld", err)
	}
	if err := release("latecomer"); err != nil {
		t.Errorf("Release: %v", err)
	}
	if !acquire("fresh", 0).Acquired {
		t.Errorf("the line is empty (its last waiter released its place), but a fair attempt was refused")
	}
}

func testFairGiveUp(t testing.TB, h Harness) {
	key := uniqueKey(t)
	fair := distlock.WithFairness()
	holder := mustLock(t, newClient(t, h, fair).Mutex(key))
	quitter := newClient(t, h, fair).Mutex(key)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Lock(ctx)
		quit <- err
	}()
	time.Sleep(50 * time.Millisecond) // the quitter queues first
	got := make(chan time.Time, 1)
	next := newClient(t, h, fair).Mutex(key)
	go func() {
		l, err := next.Lock(timeout(t, 20*time.Second))
		if err != nil {
			t.Errorf("second waiter: %v", err)
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	if err := <-quit; !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("quitting waiter: %v; want ErrNotObtained", err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	released := time.Now()
	select {
	case at := <-got:
		if d := at.Sub(released); d > time.Second {
			t.Errorf("the waiter behind one that gave up got the lock %v after the release; want promptly (the place was given up)", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the waiter behind one that gave up never got the lock")
	}
}

// testFairWakesOne: with fair waiters in line, each release wakes the
// waiter whose turn it is, promptly, and not the others. Wake-ups are
// counted through a wrapper of the backend's Watch.
func testFairWakesOne(t testing.TB, h Harness) {
	key := uniqueKey(t)
	const n = 5
	// Only notifications can wake the waiters in time: the safety poll is
	// longer than the check and the holder's lease longer still.
	opts := []distlock.Option{distlock.WithFairness(), distlock.WithSafetyPoll(time.Minute), distlock.WithTTL(time.Minute)}
	holder := mustLock(t, newClient(t, h, opts...).Mutex(key))
	var wakes atomic.Int64
	order := lineUp(t, n, func(_ int, queued distlock.Option) *distlock.Mutex {
		return distlock.New(&countWakes{Backend: h.NewBackend(t), wakes: &wakes}, append(opts, queued)...).Mutex(key)
	})
	if w := wakes.Load(); w > 0 {
		t.Errorf("%d wake-ups before any release", w)
	}
	if err := holder.Unlock(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	start := time.Now()
	for got := 0; got < n; got++ {
		if _, ok := order.next(10 * time.Second); !ok {
			t.Fatalf("%d of %d fair waiters got the lock in %v: a release did not wake the next in line", got, n, time.Since(start))
		}
	}
	// Each of the n releases wakes the next waiter: n wake-ups. Waking
	// everyone in line costs n+(n-1)+...+1.
	if w := wakes.Load(); w > n+1 {
		t.Errorf("%d wake-ups for %d releases to %d fair waiters in line; want about one per release (the next in line only)", w, n, n)
	}
}

// countWakes wraps a backend to count what its watches deliver.
type countWakes struct {
	driver.Backend
	wakes *atomic.Int64
}

func (b *countWakes) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	w, err := b.Backend.Watch(ctx, key, owner)
	if err != nil {
		return nil, err
	}
	cw := &countedWatch{Watch: w, c: make(chan struct{}, 1), stop: make(chan struct{})}
	go cw.forward(b.wakes)
	return cw, nil
}

// countedWatch counts every value of the watch it wraps and passes it on.
type countedWatch struct {
	driver.Watch
	c    chan struct{}
	stop chan struct{}
	once sync.Once
}

func (w *countedWatch) C() <-chan struct{} { return w.c }

func (w *countedWatch) Close() error {
	w.once.Do(func() { close(w.stop) })
	return w.Watch.Close()
}

func (w *countedWatch) forward(wakes *atomic.Int64) {
	for {
		select {
		case <-w.Watch.C():
			wakes.Add(1)
			select {
			case w.c <- struct{}{}:
			default:
			}
		case <-w.stop:
			return
		}
	}
}
