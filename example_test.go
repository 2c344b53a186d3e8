package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func Example() {
	ctx := context.Background()
	c := distlock.New(memlock.New()) // or redislock.New(rdb), redlock.New(...)

	l, err := c.Mutex("nightly-report", distlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer l.Unlock(ctx)

	// Do the work under a context that ends if the lease is lost, and hand
	// the fencing token to whatever the work writes to.
	work := l.Context(ctx)
	fmt.Println("holding", l.Key(), "with token", l.Token(), "lost:", work.Err() != nil)
	// Output: holding nightly-report with token 1 lost: false
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	c := distlock.New(memlock.New())
	m := c.Mutex("cron:cleanup")

	first, _ := m.TryLock(ctx)
	_, err := m.TryLock(ctx) // someone holds it: give up at once
	fmt.Println(errors.Is(err, distlock.ErrNotObtained))

	first.Unlock(ctx)
	second, err := m.TryLock(ctx)
	fmt.Println(err, second.Token() > first.Token())
	second.Unlock(ctx)
	// Output:
	// true
	// <nil> true
}

func ExampleMutex_Lock_timeout() {
	c := distlock.New(memlock.New())
	m := c.Mutex("orders:42")
	held, _ := m.Lock(context.Background())
	defer held.Unlock(context.Background())

	// Wait at most 50ms for the lock.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := m.Lock(ctx)
	fmt.Println(errors.Is(err, distlock.ErrNotObtained), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

func ExampleLock_Done() {
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store)
	l, _ := c.Mutex("leader", distlock.WithTTL(100*time.Millisecond)).Lock(ctx)

	store.Expire("leader") // the lease is lost behind the holder's back

	<-l.Done() // the watchdog's next renewal is refused
	fmt.Println(l.Err())
	fmt.Println(l.Unlock(ctx))
	// Output:
	// distlock: lock lost
	// distlock: lock lost
}

func ExampleLock_ValidUntil() {
	c := distlock.New(memlock.New())
	l, _ := c.Mutex("job", distlock.WithTTL(time.Minute), distlock.WithoutAutoRefresh()).Lock(context.Background())
	defer l.Unlock(context.Background())
	// Without the watchdog the holder must finish, or Refresh, in time.
	fmt.Println(time.Until(l.ValidUntil()) <= time.Minute)
	// Output: true
}
