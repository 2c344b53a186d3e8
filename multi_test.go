package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func TestLockAllOppositeOrdersDoNotDeadlock(t *testing.T) {
	c := distlock.New(memlock.New())
	a, b := c.Mutex("a"), c.Mutex("b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var inside atomic.Int32
	var wg sync.WaitGroup
	for _, set := range [][]*distlock.Mutex{{a, b}, {b, a}, {b, a}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				ml, err := distlock.LockAll(ctx, set...)
				if err != nil {
					t.Errorf("LockAll: %v", err)
					return
				}
				if inside.Add(1) != 1 {
					t.Errorf("two holders of the same keys at once")
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := ml.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestTryLockAllIsAllOrNone(t *testing.T) {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	held, err := c.Mutex("b").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := distlock.TryLockAll(ctx, c.Mutex("a"), c.Mutex("b"), c.Mutex("c")); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("TryLockAll with one key held: %v; want ErrNotObtained", err)
	}
	for _, k := range []string{"a", "c"} {
		l, err := c.Mutex(k).TryLock(ctx)
		if err != nil {
			t.Errorf("key %s still held after a failed TryLockAll: %v", k, err)
			continue
		}
		_ = l.Unlock(ctx)
	}

	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = distlock.LockAll(wctx, c.Mutex("a"), c.Mutex("b"))
	if !errors.Is(err, distlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockAll past its deadline: %v", err)
	}
	if l, err := c.Mutex("a").TryLock(ctx); err != nil {
		t.Errorf("key a still held after LockAll gave up: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}
	_ = held.Unlock(ctx)

	ml, err := distlock.TryLockAll(ctx, c.Mutex("b"), c.Mutex("a"))
	if err != nil {
		t.Fatalf("TryLockAll of free keys: %v", err)
	}
	if got := ml.Locks(); len(got) != 2 || got[0].Key() != "a" || got[1].Key() != "b" {
		t.Errorf("Locks() in order %v; want a, b", got)
	}
	if err := ml.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if !errors.Is(ml.Err(), distlock.ErrLockReleased) {
		t.Errorf("Err() after Unlock = %v", ml.Err())
	}
}

func TestMultiLockLostWhenOneIsLost(t *testing.T) {
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(100*time.Millisecond))
	ctx := context.Background()
	ml, err := distlock.LockAll(ctx, c.Mutex("a"), c.Mutex("b"))
	if err != nil {
		t.Fatal(err)
	}
	work := ml.Context(ctx)
	store.Expire("b")
	select {
	case <-ml.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("MultiLock.Done not closed after one of its locks was lost")
	}
	if !errors.Is(ml.Err(), distlock.ErrLockLost) || !errors.Is(context.Cause(work), distlock.ErrLockLost) {
		t.Errorf("Err() = %v, Context cause = %v; want ErrLockLost", ml.Err(), context.Cause(work))
	}
	if err := ml.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock: %v; want ErrLockLost for the lost one", err)
	}
	if l, err := c.Mutex("a").TryLock(ctx); err != nil {
		t.Errorf("the lock that was not lost was not released: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}
}

func TestLockAllInvalid(t *testing.T) {
	// A duplicate that slipped through would wait for itself until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	store := memlock.New()
	c, shared, other := distlock.New(store), distlock.New(store), distlock.New(memlock.New())
	for name, ms := range map[string][]*distlock.Mutex{
		"none":      nil,
		"nil":       {c.Mutex("a"), nil},
		"duplicate": {c.Mutex("a"), c.Mutex("b"), c.Mutex("a")},
		// Sorted by key, the two on c are not neighbours.
		"duplicate apart":       {c.Mutex("a"), shared.Mutex("a"), c.Mutex("a")},
		"same store":            {c.Mutex("a"), shared.Mutex("a")},
		"same key, other store": {c.Mutex("a"), other.Mutex("a")},
	} {
		if _, err := distlock.LockAll(ctx, ms...); !errors.Is(err, distlock.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
	if _, err := distlock.LockAll(ctx, c.Mutex("a"), c.Mutex("")); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if l, err := c.Mutex("a").TryLock(ctx); err != nil {
		t.Errorf("a held after LockAll failed on a bad key: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}
}

func ExampleLockAll() {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	// Move stock between two warehouses: both rows locked, in any order,
	// without deadlocking against a transfer the other way.
	ml, err := distlock.LockAll(ctx, c.Mutex("stock:berlin"), c.Mutex("stock:amsterdam"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ml.Unlock(ctx)
	for _, l := range ml.Locks() {
		fmt.Println(l.Key())
	}
	// Output:
	// stock:amsterdam
	// stock:berlin
}

// TestLockAllGivesBackWithinReleaseTimeout: LockAll whose context ends
// while it waits for one key gives back those it took, bounded by the
// release timeout like any Unlock with a done context, even if the backend
// does not answer.
func TestLockAllGivesBackWithinReleaseTimeout(t *testing.T) {
	be := memlock.New()
	holder, err := distlock.New(be).Mutex("b").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(context.Background())
	c := distlock.New(&fault{Backend: be, release: hangRelease}, distlock.WithReleaseTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := distlock.LockAll(ctx, c.Mutex("a"), c.Mutex("b"))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, distlock.ErrNotObtained) {
			t.Errorf("LockAll: %v; want ErrNotObtained", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockAll still giving back what it took 5s after its context ended, with a release timeout of 200ms")
	}
}

// TestLockAllNilContext: a nil context is a bad argument, not a panic.
func TestLockAllNilContext(t *testing.T) {
	m := distlock.New(memlock.New()).Mutex("k")
	//lint:ignore SA1012 a nil context is what this test is about
	if _, err := distlock.LockAll(nil, m); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("LockAll(nil): %v; want ErrInvalidArgument", err)
	}
	//lint:ignore SA1012 a nil context is what this test is about
	if _, err := distlock.TryLockAll(nil, m); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("TryLockAll(nil): %v; want ErrInvalidArgument", err)
	}
}
