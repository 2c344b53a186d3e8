package sqllock_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// TestReadRefusedByClaimRetryAfter: a reader refused only because a
// waiting writer's claim keeps new readers out is told to retry when the
// claim lapses at the latest, not at once: a waiter that retried every
// millisecond would run an acquisition transaction per millisecond for as
// long as the writer waits.
func TestReadRefusedByClaimRetryAfter(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		const queue = 10 * time.Second
		b := d.backend(t)
		ctx := ctxFor(t, 20*time.Second)
		key := "claimed"
		req := func(owner string, kind driver.Kind) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: key, Owner: owner, Kind: kind}, TTL: time.Minute}
		}
		first := req("first-reader", driver.Read)
		if g, err := b.Acquire(ctx, first); err != nil || !g.Acquired {
			t.Fatalf("Acquire of the first reader: %+v, %v", g, err)
		}
		writer := req("writer", driver.Write)
		writer.Queue = queue
		claimed := time.Now()
		if g, err := b.Acquire(ctx, writer); err != nil || g.Acquired {
			t.Fatalf("Acquire of the writer while a reader holds: %+v, %v; want refused", g, err)
		}
		// The reader leaves; the writer's claim stays until its next
		// attempt or until it lapses.
		if err := b.Release(ctx, first.Lease); err != nil {
			t.Fatalf("Release of the first reader: %v", err)
		}
		second := req("second-reader", driver.Read)
		second.Queue = queue
		g, err := b.Acquire(ctx, second)
		if err != nil || g.Acquired {
			t.Fatalf("Acquire of a reader while a writer's claim is in place: %+v, %v; want refused", g, err)
		}
		// The claim lapses no sooner than queue after the writer's attempt
		// began, and no later than queue after the reader's; a second
		// covers the rounding and the database's clock.
		if least := queue - time.Since(claimed) - time.Second; g.RetryAfter < least || g.RetryAfter > queue {
			t.Errorf("RetryAfter = %v for a reader kept out by a claim of %v; want the claim's remaining life (%v to %v)", g.RetryAfter, queue, least.Round(time.Millisecond), queue)
		}
	})
}
