package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// TestReentrantFair: a re-entrant mutex with WithFairness takes its first
// hold in turn, behind a fair waiter that queued before it; further holds
// of the same identity, while it holds, are granted at once, ahead of the
// waiters in line.
func TestReentrantFair(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	newC := func() *distlock.Client {
		return distlock.New(newBackend(t, newClient(t, srv.Addr())), distlock.WithTTL(time.Minute))
	}
	key := t.Name()
	queue := redistest.Keys(redislock.DefaultPrefix, key).Queue
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queued := func(n int64) {
		t.Helper()
		for rdb.ZCard(ctx, queue).Val() < n {
			if ctx.Err() != nil {
				t.Fatalf("fewer than %d waiters queued", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	type result struct {
		name string
		l    *distlock.Lock
		err  error
	}
	got := make(chan result, 3)
	lock := func(name string, m *distlock.Mutex) {
		go func() {
			l, err := m.Lock(ctx)
			got <- result{name, l, err}
		}()
	}
	next := func() result {
		t.Helper()
		r := <-got
		if r.err != nil {
			t.Fatalf("%s: Lock: %v", r.name, r.err)
		}
		return r
	}

	holder, err := newC().Mutex(key, distlock.WithFairness()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := distlock.NewOwnerID()
	lock("fair waiter", newC().Mutex(key, distlock.WithFairness()))
	queued(1)
	lock("re-entrant", newC().Mutex(key, distlock.WithFairness(), distlock.WithOwner(id)))
	queued(2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := next()
	if first.name != "fair waiter" {
		t.Fatalf("%s was granted first; want the fair waiter, which queued first", first.name)
	}
	lock("last waiter", newC().Mutex(key, distlock.WithFairness()))
	queued(2)
	if err := first.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	reentrant := next()
	if reentrant.name != "re-entrant" {
		t.Fatalf("%s was granted; want the re-entrant mutex, next in line", reentrant.name)
	}
	// Another hold of the same identity, from another client, while the
	// last waiter is in line: granted at once.
	again, err := newC().Mutex(key, distlock.WithFairness(), distlock.WithOwner(id)).TryLock(ctx)
	if err != nil {
		t.Fatalf("a further hold of the identity that holds the lock: %v; want it granted at once", err)
	}
	if again.Token() != reentrant.l.Token() {
		t.Errorf("the further hold has token %d; want the lease's %d", again.Token(), reentrant.l.Token())
	}
	if err := reentrant.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("%s granted (%v) while a hold of the re-entrant lease remains", r.name, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	last := next()
	if last.name != "last waiter" {
		t.Fatalf("%s granted; want the last waiter", last.name)
	}
	_ = last.l.Unlock(ctx)
}
