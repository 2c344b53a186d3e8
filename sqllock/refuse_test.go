package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// TestRefusalReadsWithoutLocking: on PostgreSQL, an attempt on a key held
// by another is refused from the row as the statement sees it, without
// locking the row: it does not queue behind a transaction that has the
// row locked (as a release or a renewal in flight does).
func TestRefusalReadsWithoutLocking(t *testing.T) {
	_, d := startPostgres(t)
	ctx := context.Background()
	b := d.backend(t)
	held := driver.Lease{Key: "busy", Owner: "holder"}
	if g, err := b.Acquire(ctx, driver.Request{Lease: held, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	tx, err := d.open(t).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM distlock_leases WHERE name = $1 FOR UPDATE`, held.Key); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := b.Acquire(actx, driver.Request{Lease: driver.Lease{Key: held.Key, Owner: "waiter"}, TTL: time.Minute})
	if err != nil || g.Acquired {
		t.Fatalf("Acquire of a held key while its row is locked: %+v, %v; want a refusal at once", g, err)
	}
	if g.RetryAfter <= 0 || g.RetryAfter > time.Minute {
		t.Errorf("RetryAfter %v; want the holder's remaining lease (at most 1m)", g.RetryAfter)
	}
}
