package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

// sendInvoices is the code under test. It sends the day's invoices unless
// another instance is already at it, and stops when it loses its lock.
// In production c is a client on Redis; its tests give it one on memlock.
func sendInvoices(ctx context.Context, c *distlock.Client, send func(ctx context.Context, token uint64) error) (sent bool, err error) {
	l, err := c.Mutex("invoices").TryLock(ctx)
	if errors.Is(err, distlock.ErrNotObtained) {
		return false, nil // another instance is sending them
	}
	if err != nil {
		return false, err
	}
	defer l.Unlock(context.Background())
	return true, send(l.Context(ctx), l.Token())
}

// Example is a unit test of code that takes locks: memlock needs no server,
// and the test plays the other instances and the lost lease itself.
func Example() {
	ctx := context.Background()
	store := memlock.New()
	c := distlock.New(store, distlock.WithTTL(time.Second))
	send := func(ctx context.Context, token uint64) error {
		fmt.Println("sending with token", token)
		return nil
	}

	// Alone, the code sends the invoices.
	fmt.Println(sendInvoices(ctx, c, send))

	// While another instance holds the lock, it does not.
	other, _ := c.Mutex("invoices").Lock(ctx)
	fmt.Println(sendInvoices(ctx, c, send))
	other.Unlock(ctx)

	// If the lease is lost while it sends, the work's context ends: as if
	// the lease had run out during a long pause.
	fmt.Println(sendInvoices(ctx, c, func(ctx context.Context, token uint64) error {
		store.Expire("invoices")
		<-ctx.Done()
		return context.Cause(ctx)
	}))

	// Output:
	// sending with token 1
	// true <nil>
	// false <nil>
	// true distlock: lock lost
}
