package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func TestSemaphoreMisuse(t *testing.T) {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	for _, n := range []int{0, -1} {
		if _, err := c.Semaphore("s", n).TryAcquire(ctx); !errors.Is(err, distlock.ErrInvalidArgument) {
			t.Errorf("Semaphore(%d): %v; want ErrInvalidArgument", n, err)
		}
	}
	if _, err := c.Semaphore("s", 2, distlock.WithFairness()).Acquire(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("fair semaphore: %v; want ErrUnsupported", err)
	}
	plain := distlock.New(plainMem())
	if _, err := plain.Semaphore("s", 2).TryAcquire(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("semaphore on a backend without them: %v; want ErrUnsupported", err)
	}
	if _, err := plain.Mutex("m", distlock.WithFairness()).TryLock(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("fair lock on a backend without queues: %v; want ErrUnsupported", err)
	}
}

func ExampleClient_Semaphore() {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	api := c.Semaphore("payment-provider", 2) // at most 2 callers at once

	first, _ := api.TryAcquire(ctx)
	second, _ := api.TryAcquire(ctx)
	_, err := api.TryAcquire(ctx)
	fmt.Println("third caller:", errors.Is(err, distlock.ErrNotObtained))

	first.Unlock(ctx)
	third, err := api.TryAcquire(ctx)
	fmt.Println("after one left:", err == nil)
	second.Unlock(ctx)
	third.Unlock(ctx)
	// Output:
	// third caller: true
	// after one left: true
}

func TestRWMutexUnsupported(t *testing.T) {
	ctx := context.Background()
	plain := distlock.New(plainMem())
	if _, err := plain.RWMutex("k").RLock(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RLock on a backend without read-write locks: %v; want ErrUnsupported", err)
	}
	c := distlock.New(memlock.New())
	if _, err := c.RWMutex("k", distlock.WithFairness()).TryLock(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("fair RWMutex: %v; want ErrUnsupported", err)
	}
	if _, err := c.RWMutex("").TryRLock(ctx); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

func ExampleClient_RWMutex() {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	config := c.RWMutex("config")

	r1, _ := config.RLock(ctx) // readers share
	r2, _ := config.RLock(ctx)
	_, err := config.TryLock(ctx) // a writer must wait for them
	fmt.Println("writer while reading:", errors.Is(err, distlock.ErrNotObtained))

	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w, err := config.TryLock(ctx)
	fmt.Println("writer alone:", err == nil)
	w.Unlock(ctx)
	// Output:
	// writer while reading: true
	// writer alone: true
}

// TestSemaphoreOwnerSaysWhy: a semaphore given an owner identity is
// refused for what it is, not as something the backend lacks.
func TestSemaphoreOwnerSaysWhy(t *testing.T) {
	c := distlock.New(memlock.New())
	_, err := c.Semaphore("pool", 2, distlock.WithOwner(distlock.NewOwnerID())).TryAcquire(context.Background())
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "only a mutex can be re-entrant") {
		t.Errorf("a semaphore with WithOwner: %v; want ErrUnsupported saying only a mutex can be re-entrant", err)
	}
	_, err = c.RWMutex("doc", distlock.WithFairness()).TryLock(context.Background())
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "only a mutex can be fair") {
		t.Errorf("a fair RWMutex: %v; want ErrUnsupported saying only a mutex can be fair", err)
	}
	l, err := c.Mutex("held").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	if _, err := c.Mutex("held").TryLock(context.Background()); !errors.Is(err, distlock.ErrNotObtained) || !strings.Contains(err.Error(), `"held"`) {
		t.Errorf("TryLock of a held key: %v; want ErrNotObtained naming the key", err)
	}
}
