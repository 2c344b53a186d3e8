package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// TestPrepareFailureReturnsError: a statement that cannot be prepared
// (here because the pool was closed under a holder) is run unprepared,
// which reports the pool's error to the caller. The first MariaDB and
// SQLite use of each hot statement prepares it.
func TestPrepareFailureReturnsError(t *testing.T) {
	d := sqliteFile(t)
	db := d.open(t)
	b := d.backendOn(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := driver.Lease{Key: "k", Owner: "holder"}
	if g, err := b.Acquire(ctx, driver.Request{Lease: held, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	db.Close()
	if err := b.Release(ctx, held); err == nil {
		t.Fatal("Release on a closed pool = nil; want the pool's error")
	}
	if _, err := b.Refresh(ctx, held, time.Minute); err == nil {
		t.Fatal("Refresh on a closed pool = nil; want the pool's error")
	}
}
