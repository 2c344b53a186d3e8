package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/memlock"
	"github.com/distlock-go/distlock/redislock"
)

// recorder keeps the events it observes.
type recorder struct {
	mu     sync.Mutex
	events []distlock.Event
	added  chan struct{} // receives after each event, if not full
}

func newRecorder() *recorder { return &recorder{added: make(chan struct{}, 100)} }

func (r *recorder) Observe(_ context.Context, e distlock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []distlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]distlock.Event(nil), r.events...)
}

// await waits until r has n events.
func (r *recorder) await(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(r.all()) < n {
		select {
		case <-r.added:
		case <-deadline:
			t.Fatalf("timed out waiting for %d events; have %s", n, summary(r.all()))
		}
	}
}

// summary renders events as "type[ outcome|cause] #attempts", the part of
// them a test can state exactly.
func summary(events []distlock.Event) string {
	var b strings.Builder
	for i, e := range events {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Type.String())
		switch e.Type {
		case distlock.EventAttempt:
			fmt.Fprintf(&b, " %s #%d", e.Outcome, e.Attempts)
		case distlock.EventAcquired, distlock.EventFailed:
			fmt.Fprintf(&b, " #%d", e.Attempts)
		case distlock.EventLost:
			fmt.Fprintf(&b, " %s", e.Cause)
		}
		if e.Err != nil {
			b.WriteString(" (error)")
		}
	}
	return b.String()
}

// checkEvents compares the events with want (see summary) and checks what
// every event of one holding shares: ID, key, backend, token.
func checkEvents(t *testing.T, events []distlock.Event, key, backend string, want string) {
	t.Helper()
	if got := summary(events); got != want {
		t.Fatalf("events:\n  %s\nwant:\n  %s", got, want)
	}
	var token uint64
	for i, e := range events {
		if e.ID != events[0].ID || e.ID == 0 || e.Key != key || e.Backend != backend {
			t.Errorf("event %d (%s): ID %d, key %q, backend %q; want ID %d (not 0), key %q, backend %q",
				i, e.Type, e.ID, e.Key, e.Backend, events[0].ID, key, backend)
		}
		switch e.Type {
		case distlock.EventAcquired:
			token = e.Token
			if e.Token == 0 || e.ValidFor <= 0 || e.ValidUntil.IsZero() || e.Wait <= 0 {
				t.Errorf("acquired: %+v; want a token, a validity, a deadline and a wait", e)
			}
		case distlock.EventRenewed, distlock.EventRenewalFailed, distlock.EventLost, distlock.EventReleased:
			if e.Token != token {
				t.Errorf("%s: token %d; want %d", e.Type, e.Token, token)
			}
		case distlock.EventAttempt:
			if e.Latency <= 0 || e.Wait < e.Latency {
				t.Errorf("attempt %d: latency %v, wait %v; want 0 < latency <= wait", e.Attempts, e.Latency, e.Wait)
			}
		}
		if (e.Type == distlock.EventLost || e.Type == distlock.EventReleased) && e.Held <= 0 {
			t.Errorf("%s: held %v; want it positive", e.Type, e.Held)
		}
	}
}

func TestEventsUncontended(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder()
	c := distlock.New(memlock.New(), distlock.WithObserver(rec))
	l, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, rec.all(), "k", "memlock", "attempt granted #1, acquired #1, released")
}

// TestEventsWaitBehindHolder: only the waiter's mutex is observed. It
// tries, subscribes to releases, tries again, and is granted the lock on
// the release.
func TestEventsWaitBehindHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := distlock.New(memlock.New(), distlock.WithSafetyPoll(time.Minute))
	holder, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	got := make(chan *distlock.Lock, 1)
	go func() {
		l, err := c.Mutex("k", distlock.WithObserver(rec)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	rec.await(t, 2) // held, subscribed, held again: now it sleeps
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	events := rec.all()
	checkEvents(t, events, "k", "memlock", "attempt held #1, attempt held #2, attempt granted #3, acquired #3, released")
	if events[3].Token != holder.Token()+1 {
		t.Errorf("acquired token %d; want %d", events[3].Token, holder.Token()+1)
	}
}

// TestEventsRefusedRenewal: the watchdog's first renewal fails (its outcome
// unknown), the next is refused.
func TestEventsRefusedRenewal(t *testing.T) {
	ctx := context.Background()
	var n int
	var mu sync.Mutex
	b := &fault{Backend: memlock.New(), refresh: func(context.Context, driver.Lease, time.Duration, refreshFunc) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 1 {
			return 0, errInjected
		}
		return 0, driver.ErrNotHeld
	}}
	rec := newRecorder()
	l, err := distlock.New(b, distlock.WithObserver(rec), distlock.WithTTL(time.Second)).Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	within(t, l.Done(), 10*time.Second, "the loss")
	rec.await(t, 4) // reported just after Done closes
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock: %v; want ErrLockLost", err)
	}
	events := rec.all()
	checkEvents(t, events, "k", "memlock", "attempt granted #1, acquired #1, renewal failed (error), lost refused (error)")
	lost := events[3]
	if !errors.Is(lost.Err, distlock.ErrLockLost) || lost.Late >= 0 {
		t.Errorf("lost: error %v, late %v; want ErrLockLost, noticed before the deadline", lost.Err, lost.Late)
	}
	if !errors.Is(events[2].Err, errInjected) {
		t.Errorf("renewal failed: error %v; want %v", events[2].Err, errInjected)
	}
}

// newRedisClient returns a client of the Redis server at addr, made as a
// URL opens one: the backend repeats a call whose reply was lost.
func newRedisClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestEventsPausedServer: the server stops answering while the lock is
// held; the renewal is never confirmed and the lease ends at its deadline.
func TestEventsPausedServer(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := redislock.New(newRedisClient(t, srv.Addr()))
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := distlock.New(b, distlock.WithObserver(rec), distlock.WithTTL(600*time.Millisecond)).Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	within(t, l.Done(), 10*time.Second, "the loss")
	rec.await(t, 3)
	srv.Resume(t)
	_ = l.Unlock(ctx)
	events := rec.all()
	checkEvents(t, events, "k", "redislock", "attempt granted #1, acquired #1, lost expired (error)")
	if lost := events[2]; !errors.Is(lost.Err, distlock.ErrLockExpired) || lost.Late < 0 || lost.Late > 5*time.Second {
		t.Errorf("lost: error %v, late %v; want ErrLockExpired, noticed at the deadline", lost.Err, lost.Late)
	}
}

// TestEventsLostReleaseReply: the release is applied but its reply lost;
// the backend's repeat confirms it, and the holding ends as released.
func TestEventsLostReleaseReply(t *testing.T) {
	srv := testserver.StartRedis(t)
	proxy := testserver.StartProxy(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Loaded up front: the reply to drop must be the script's, not NOSCRIPT.
	if err := redisnode.LoadScripts(ctx, newRedisClient(t, srv.Addr())); err != nil {
		t.Fatal(err)
	}
	b := redislock.New(newRedisClient(t, proxy.Addr()))
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	l, err := distlock.New(b, distlock.WithObserver(rec), distlock.WithTTL(time.Minute)).Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := proxy.DropReply(redistest.Keys(redislock.DefaultPrefix, "k").Channel)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	within(t, dropped, time.Second, "the dropped reply")
	checkEvents(t, rec.all(), "k", "redislock", "attempt granted #1, acquired #1, released")
}

// TestEventsMutexObserverAfterClient: a mutex's observer sees the events
// after the client's, and a failed TryLock ends with EventFailed.
func TestEventsMutexObserverAfterClient(t *testing.T) {
	ctx := context.Background()
	var order []string
	named := func(name string) distlock.Observer {
		return distlock.ObserverFunc(func(_ context.Context, e distlock.Event) {
			order = append(order, name+" "+e.Type.String())
		})
	}
	c := distlock.New(memlock.New(), distlock.WithObserver(named("client")))
	holder, err := c.Mutex("k").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order = nil
	if _, err := c.Mutex("k", distlock.WithObserver(named("mutex"))).TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("TryLock: %v; want ErrNotObtained", err)
	}
	want := "client attempt, mutex attempt, client failed, mutex failed"
	if got := strings.Join(order, ", "); got != want {
		t.Errorf("events %s; want %s", got, want)
	}
	_ = holder.Unlock(ctx)
}

// countingObserver counts the events it sees, by type.
type countingObserver struct {
	mu sync.Mutex
	n  map[distlock.EventType]int
}

func (c *countingObserver) Observe(_ context.Context, e distlock.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[e.Type]++
}

// TestObserverGivenTwice: an observer given to the client and again to a
// lock sees each event once, as a metric of locks held (incremented on
// each grant, decremented on each release) needs. Observer funcs, which
// cannot be compared, are each called.
func TestObserverGivenTwice(t *testing.T) {
	obs := &countingObserver{n: map[distlock.EventType]int{}}
	var funcs int
	f := distlock.ObserverFunc(func(context.Context, distlock.Event) { funcs++ })
	c := distlock.New(memlock.New(), distlock.WithObserver(obs), distlock.WithObserver(f))
	ctx := context.Background()
	l, err := c.Mutex("twice", distlock.WithObserver(obs), distlock.WithObserver(f)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if obs.n[distlock.EventAcquired] != 1 || obs.n[distlock.EventReleased] != 1 {
		t.Errorf("events seen %v; want one grant and one release", obs.n)
	}
	if funcs < 2*3 { // attempt, acquired, released, each to both funcs
		t.Errorf("the two ObserverFuncs saw %d events; want each to see every event", funcs)
	}
}

// TestEventKind: an event names what its lock takes with the Kind that
// Info reports, so that a dashboard shows one vocabulary: "read" for an
// RWMutex's reader, "permit" for a Semaphore's.
func TestEventKind(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder()
	c := distlock.New(memlock.New(), distlock.WithObserver(rec))
	for _, take := range []func() (*distlock.Lock, error){
		func() (*distlock.Lock, error) { return c.Mutex("m").TryLock(ctx) },
		func() (*distlock.Lock, error) { return c.RWMutex("rw").TryLock(ctx) },
		func() (*distlock.Lock, error) { return c.RWMutex("rw").TryRLock(ctx) },
		func() (*distlock.Lock, error) { return c.Semaphore("s", 2).TryAcquire(ctx) },
	} {
		l, err := take()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range rec.all() {
		if e.Type == distlock.EventAcquired {
			got = append(got, e.Key+" "+e.Kind.String())
		}
	}
	if want := []string{"m mutex", "rw write", "rw read", "s permit"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("acquired events' kinds %q; want %q", got, want)
	}
	if e := rec.all()[0]; e.Kind != distlock.KindMutex {
		t.Errorf("a Mutex's event: Kind %d; want KindMutex", e.Kind)
	}
}
