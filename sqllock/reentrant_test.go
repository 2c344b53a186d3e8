package sqllock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// TestReentrantHoldsInTable checks on the driver what the conformance
// suite does not reach: a repeat that leaves a longer lease as it was is
// still granted (MySQL reports such a statement as changing no row), the
// table keeps a digest of the identity, not the identity, and an owner
// token that would break the owners list is refused.
func TestReentrantHoldsInTable(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		b := d.backend(t)
		ctx := ctxFor(t, 20*time.Second)
		const identity = "the-secret-identity-0123456789"
		req := func(owner string, ttl time.Duration) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: "nested", Owner: owner}, TTL: ttl, Reentry: identity}
		}
		long, short := req("long", time.Minute), req("short", 500*time.Millisecond)
		g, err := b.Acquire(ctx, long)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		for i := range 3 { // the repeats change nothing in the row
			s, err := b.Acquire(ctx, short)
			if err != nil || !s.Acquired || s.Token != g.Token {
				t.Fatalf("nested Acquire %d: %+v, %v; want granted with token %d", i+1, s, err, g.Token)
			}
			if _, err := b.Refresh(ctx, short.Lease, short.TTL); err != nil {
				t.Fatalf("Refresh %d of the short hold: %v", i+1, err)
			}
		}
		info, err := b.Inspect(ctx, "nested")
		if err != nil || !info.Held || info.Holds != 2 || info.TTL < 30*time.Second {
			t.Fatalf("Inspect: %+v, %v; want 2 holds, the long lease", info, err)
		}
		other := driver.Request{Lease: driver.Lease{Key: "nested", Owner: "other"}, TTL: time.Minute, Reentry: "another-identity"}
		if o, err := b.Acquire(ctx, other); err != nil || o.Acquired || o.RetryAfter < 30*time.Second {
			t.Errorf("Acquire by another identity: %+v, %v; want refused until the long lease ends", o, err)
		}
		var n int
		q := "SELECT COUNT(*) FROM " + sqllock.DefaultTable + " WHERE reentry LIKE '%secret%' OR meta LIKE '%secret%'"
		if err := d.open(t).QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Errorf("rows holding the identity in the clear: %d, %v; want 0", n, err)
		}
		for _, r := range []driver.Request{short, long} {
			if err := b.Release(ctx, r.Lease); err != nil {
				t.Fatalf("Release(%s): %v", r.Owner, err)
			}
		}
		o, err := b.Acquire(ctx, other)
		if err != nil || !o.Acquired || o.Token <= g.Token {
			t.Errorf("Acquire after the last hold left: %+v, %v; want granted with a token above %d", o, err, g.Token)
		}
		_ = b.Release(context.Background(), other.Lease)
		bad := driver.Request{Lease: driver.Lease{Key: "nested", Owner: "a,b"}, TTL: time.Minute}
		if _, err := b.Acquire(ctx, bad); err == nil || !strings.Contains(err.Error(), "comma") {
			t.Errorf("Acquire with a comma in the owner: %v; want an error naming the comma", err)
		}
	})
}
