package sqllock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// checkHandOver: a release of a fair lock with waiters in line grants it
// to the oldest live waiter in its own transaction, before that waiter
// tries again, skipping a waiter whose place lapsed; the waiter's next
// attempt finds the lock its own, with a greater token.
func checkHandOver(t *testing.T, d database) {
	ctx := ctxFor(t, 60*time.Second)
	b, other := d.backend(t), d.backend(t)
	if !b.Capabilities().Fair {
		t.Fatalf("Capabilities().Fair = false; want fair locks")
	}
	const key = "handed-over"
	req := func(name string, queue time.Duration) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: name}, TTL: time.Minute, Fair: true, Queue: queue}
	}
	acquire := func(b *sqllock.Backend, r driver.Request) driver.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%s): %v", r.Owner, err)
		}
		return g
	}
	held := acquire(b, req("holder", 0))
	if !held.Acquired {
		t.Fatalf("fair Acquire of a free key refused")
	}
	if acquire(other, req("vanished", 500*time.Millisecond)).Acquired || acquire(b, req("waiter", time.Minute)).Acquired {
		t.Fatalf("fair Acquire of a held key granted")
	}
	time.Sleep(1500 * time.Millisecond) // "vanished" makes no attempt: its place lapses
	if err := other.Release(ctx, req("holder", 0).Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || !info.Held {
		t.Fatalf("Inspect after the release: %+v, %v; want held, handed to the waiter in line", info, err)
	}
	if acquire(other, req("newcomer", 0)).Acquired {
		t.Errorf("a newcomer took the lock handed to the waiter in line")
	}
	g := acquire(b, req("waiter", time.Minute))
	if !g.Acquired || g.Token <= held.Token {
		t.Fatalf("the waiter's attempt after the hand-over: %+v; want granted with a token above %d", g, held.Token)
	}
	if v := acquire(other, req("vanished", 0)); v.Acquired {
		t.Errorf("the waiter whose place lapsed took the lock: %+v", v)
	}
	if err := b.Release(ctx, req("waiter", 0).Lease); err != nil {
		t.Fatalf("Release by the waiter: %v", err)
	}
}

func TestFairHandOverPostgres(t *testing.T) {
	_, d := startPostgres(t)
	checkHandOver(t, d)
}

func TestFairHandOverMariaDB(t *testing.T) {
	_, d := startMariaDB(t)
	checkHandOver(t, d)
}

func TestFairHandOverSQLite(t *testing.T) {
	checkHandOver(t, sqliteFile(t))
}

// TestFairHandOverRequestsPostgres: on PostgreSQL the usual hand-over (the
// only hold released, a live waiter in line) is one statement after the
// plain release finds the line, not a transaction of ten: the release
// waits on the row for no longer than a plain one.
func TestFairHandOverRequestsPostgres(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 60*time.Second)
	db, c := d.counting(t)
	b, other := d.backendOn(t, db, sqllock.WithListener(nil)), d.backend(t)
	const key = "handed-in-one"
	req := func(name string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: name}, TTL: time.Minute, Fair: true, Queue: time.Minute}
	}
	for _, r := range []struct {
		b    *sqllock.Backend
		name string
		want bool
	}{{b, "holder", true}, {other, "waiter", false}} {
		if g, err := r.b.Acquire(ctx, req(r.name)); err != nil || g.Acquired != r.want {
			t.Fatalf("Acquire(%s): %+v, %v; want granted %v", r.name, g, err, r.want)
		}
	}
	c.take()
	if err := b.Release(ctx, req("holder").Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if sent := requests(c.take()); len(sent) > 2 {
		t.Errorf("the hand-over made %d requests; want 2:\n%s", len(sent), strings.Join(sent, "\n"))
	}
	g, err := other.Acquire(ctx, req("waiter"))
	if err != nil || !g.Acquired {
		t.Fatalf("the waiter's attempt after the hand-over: %+v, %v; want granted", g, err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || !info.Held || info.Token != g.Token {
		t.Errorf("Inspect: %+v, %v; want held with token %d", info, err, g.Token)
	}
}

// TestFairJoinRequestsPostgres: on PostgreSQL a fair attempt that finds
// the key held and enters the line takes out the places that ended and
// finds the first in line in one statement: the attempt's statement for a
// lease handed over, then a transaction of BEGIN, the row's lock, the
// line's head, the place, the count and COMMIT; seven requests in all.
func TestFairJoinRequestsPostgres(t *testing.T) {
	_, d := startPostgres(t)
	ctx := ctxFor(t, 60*time.Second)
	db, c := d.counting(t)
	holder, b := d.backend(t), d.backendOn(t, db, sqllock.WithListener(nil))
	const key = "join-in-six"
	req := func(name string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: name}, TTL: time.Minute, Fair: true, Queue: time.Minute}
	}
	if g, err := holder.Acquire(ctx, req("holder")); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	for i := range 3 {
		c.take()
		if g, err := b.Acquire(ctx, req("waiter")); err != nil || g.Acquired {
			t.Fatalf("attempt %d: %+v, %v; want refused", i, g, err)
		}
		if sent := requests(c.take()); i > 0 && len(sent) > 7 {
			t.Fatalf("attempt %d: a fair attempt entering the line made %d requests; want 7:\n%s", i, len(sent), strings.Join(sent, "\n"))
		}
	}
	// The line still works: the holder's release hands the key over.
	if err := holder.Release(ctx, req("holder").Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if g, err := b.Acquire(ctx, req("waiter")); err != nil || !g.Acquired {
		t.Fatalf("the waiter's attempt after the release: %+v, %v; want granted", g, err)
	}
}
