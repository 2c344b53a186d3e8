package distlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/memlock"
	"github.com/distlock-go/distlock/redislock"
)

// term is what a leader function saw of one term.
type term struct {
	id         string
	token      uint64
	start      time.Time // when fn was called
	end        time.Time // when fn saw its ctx done
	validUntil time.Time // the lease's last deadline, read at end
	cause      error     // context.Cause of fn's ctx
}

// candidate runs an election for id in the background and records its terms.
type candidate struct {
	id      string
	e       *distlock.Election
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run returned
	err     error         // Run's result, once done
	leading chan term     // a term that started
	ended   chan term     // a term whose ctx ended
}

func campaign(t *testing.T, c *distlock.Client, key, id string, opts ...distlock.Option) *candidate {
	t.Helper()
	opts = append(opts, distlock.WithMetadata(map[string]string{"id": id}))
	ctx, cancel := context.WithCancel(context.Background())
	cd := &candidate{
		id: id, e: c.Election(key, opts...), cancel: cancel,
		done: make(chan struct{}), leading: make(chan term, 16), ended: make(chan term, 16),
	}
	cd.e.Backoff = distlock.ConstantBackoff(10 * time.Millisecond)
	go func() {
		defer close(cd.done)
		cd.err = cd.e.Run(ctx, func(ctx context.Context, l *distlock.Lock) error {
			tm := term{id: id, token: l.Token(), start: time.Now()}
			cd.leading <- tm
			<-ctx.Done()
			tm.end, tm.validUntil, tm.cause = time.Now(), l.ValidUntil(), context.Cause(ctx)
			cd.ended <- tm
			return ctx.Err()
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-cd.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: Run did not return after its ctx was cancelled", id)
		}
	})
	return cd
}

// recv waits for a value on ch, failing the test after timeout.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// wantLeader checks that the election's leader, as anyone sees it, is id.
func wantLeader(t *testing.T, e *distlock.Election, id string) {
	t.Helper()
	info, err := e.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Meta["id"] != id {
		t.Fatalf("Leader() = held %v, meta %v; want leader %q", info.Held, info.Meta, id)
	}
}

// One candidate leads and the others observe it; when the leader shuts
// down it resigns, and another leads at once, long before the lease ends.
func TestElectionResignsOnShutdown(t *testing.T) {
	t.Parallel()
	store := memlock.New()
	const ttl = 30 * time.Second
	a := campaign(t, distlock.New(store), "scheduler", "a", distlock.WithTTL(ttl))
	first := recv(t, a.leading, 10*time.Second, "a to lead")
	b := campaign(t, distlock.New(store), "scheduler", "b", distlock.WithTTL(ttl))
	wantLeader(t, b.e, "a")
	select {
	case tm := <-b.leading:
		t.Fatalf("b leads (token %d) while a does", tm.token)
	case <-time.After(100 * time.Millisecond):
	}

	a.cancel()
	recv(t, a.done, 10*time.Second, "a's Run to return")
	if !errors.Is(a.err, context.Canceled) {
		t.Fatalf("a's Run returned %v, want context.Canceled", a.err)
	}
	ended := recv(t, a.ended, time.Second, "a's term to end")
	if !errors.Is(ended.cause, context.Canceled) {
		t.Errorf("a's term ended with cause %v, want context.Canceled", ended.cause)
	}
	second := recv(t, b.leading, ttl/3, "b to lead after a resigned") // not after the lease expired
	if second.token <= first.token {
		t.Errorf("b's token %d is not above a's %d", second.token, first.token)
	}
	wantLeader(t, b.e, "b")
}

// A leader function that returns ends the campaign: Run resigns and
// returns the function's error.
func TestElectionFnReturnResigns(t *testing.T) {
	t.Parallel()
	c := distlock.New(memlock.New())
	e := c.Election("job", distlock.WithTTL(time.Minute))
	errDone := errors.New("done")
	calls := 0
	err := e.Run(context.Background(), func(ctx context.Context, l *distlock.Lock) error {
		calls++
		if info, err := e.Leader(ctx); err != nil || !info.Held || info.Token != l.Token() {
			t.Errorf("Leader() while leading = %+v, %v", info, err)
		}
		return errDone
	})
	if !errors.Is(err, errDone) || calls != 1 {
		t.Fatalf("Run = %v after %d calls, want %v after 1", err, calls, errDone)
	}
	if info, err := e.Leader(context.Background()); err != nil || info.Held {
		t.Fatalf("after Run returned, Leader() = %+v, %v; want free", info, err)
	}
}

func TestElectionBadInput(t *testing.T) {
	t.Parallel()
	c := distlock.New(memlock.New())
	fn := func(context.Context, *distlock.Lock) error { return nil }
	//lint:ignore SA1012 testing that a nil context is rejected
	if err := c.Election("k").Run(nil, fn); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	if err := c.Election("k").Run(context.Background(), nil); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("nil fn: %v", err)
	}
	if err := c.Election("").Run(context.Background(), fn); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := c.Election("k", distlock.WithTTL(time.Nanosecond)).Run(context.Background(), fn); !errors.Is(err, distlock.ErrInvalidTTL) {
		t.Errorf("bad TTL: %v", err)
	}
	if _, err := (*distlock.Client)(nil).Election("k").Leader(context.Background()); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("nil client: %v", err)
	}
}

// TestElectionIgnoresOwnerIdentity: candidates whose contexts carry one
// OwnerID (a request-scoped identity passed down by habit) must still
// lead one at a time; a re-entrant election mutex lets both in.
func TestElectionIgnoresOwnerIdentity(t *testing.T) {
	t.Parallel()
	store := memlock.New()
	ctx, cancel := context.WithTimeout(distlock.ContextWithOwner(context.Background(), distlock.NewOwnerID()), 30*time.Second)
	defer cancel()
	var (
		mu               sync.Mutex
		leading, overlap int
		terms            int
		wg               sync.WaitGroup
	)
	for range 2 {
		e := distlock.New(store).Election("owned")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5 && ctx.Err() == nil; i++ {
				_ = e.Run(ctx, func(ctx context.Context, _ *distlock.Lock) error {
					mu.Lock()
					leading++
					terms++
					if leading > 1 {
						overlap++
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					mu.Lock()
					leading--
					mu.Unlock()
					return nil // resign; the loop campaigns again
				})
			}
		}()
	}
	wg.Wait()
	if terms != 10 {
		t.Errorf("%d terms; want 10", terms)
	}
	if overlap > 0 {
		t.Errorf("two candidates sharing an OwnerID led at once %d times", overlap)
	}
	err := distlock.New(store).Election("owned", distlock.WithOwner(distlock.NewOwnerID())).Run(ctx, func(context.Context, *distlock.Lock) error { return nil })
	if !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("an election given WithOwner: %v; want ErrInvalidArgument", err)
	}
}

// TestElectionLeadingAndCampaigned: a caller learns whether it leads
// without running the loop itself, after the first campaign's outcome.
func TestElectionLeadingAndCampaigned(t *testing.T) {
	t.Parallel()
	store := memlock.New()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	work := func(ctx context.Context, _ *distlock.Lock) error { <-ctx.Done(); return ctx.Err() }

	a := distlock.New(store).Election("sched")
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx, work) }()
	select {
	case <-a.Campaigned():
	case <-ctx.Done():
		t.Fatal("the first campaign on a free election has no outcome")
	}
	if !a.Leading() {
		t.Fatal("the only candidate does not lead after its first campaign")
	}

	b := distlock.New(store).Election("sched")
	bDone := make(chan error, 1)
	go func() { bDone <- b.Run(ctx, work) }()
	select {
	case <-b.Campaigned():
	case <-ctx.Done():
		t.Fatal("a campaign against a leader has no outcome: it waits for the lead instead of saying someone else leads")
	}
	if b.Leading() {
		t.Fatal("two candidates lead")
	}

	stopA() // a resigns; b takes over
	<-aDone
	if a.Leading() {
		t.Error("a leads after its Run returned")
	}
	for !b.Leading() {
		if ctx.Err() != nil {
			t.Fatal("b never led after a resigned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-bDone
	if b.Leading() {
		t.Error("b leads after its Run returned")
	}
}

// A leader that loses its lease has its function's ctx cancelled with the
// loss as cause, and campaigns again.
func TestElectionCampaignsAgainAfterLoss(t *testing.T) {
	t.Parallel()
	// The key is taken away on the next renewal after revoke is set, as
	// when a lease expired on the server: the renewal is refused.
	var revoke atomic.Bool
	mem := memlock.New()
	store := &fault{Backend: mem, refresh: func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
		if revoke.Swap(false) {
			_ = mem.Release(ctx, l)
			return 0, driver.ErrNotHeld
		}
		return next(ctx, l, ttl)
	}}
	a := campaign(t, distlock.New(store), "scheduler", "a", distlock.WithTTL(300*time.Millisecond))
	first := recv(t, a.leading, 10*time.Second, "a to lead")
	revoke.Store(true)
	ended := recv(t, a.ended, 10*time.Second, "a's term to end on the refused renewal")
	if !errors.Is(ended.cause, distlock.ErrLockLost) {
		t.Fatalf("term ended with cause %v, want ErrLockLost", ended.cause)
	}
	second := recv(t, a.leading, 10*time.Second, "a to lead again")
	if second.token <= first.token {
		t.Errorf("second term's token %d is not above the first's %d", second.token, first.token)
	}
	select {
	case <-a.done:
		t.Fatalf("Run returned %v after a lost term", a.err)
	default:
	}
}

// pausing stops the calls that pass it while paused, as a paused process
// or a cut network would: they hang until their ctx ends.
type pausing struct {
	mu     sync.Mutex
	paused chan struct{} // closed on resume; nil when not paused
}

func (p *pausing) wait(ctx context.Context) error {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pausing) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

func (p *pausing) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// fault returns b behind p: its acquisitions, renewals and releases wait
// while p is paused.
func (p *pausing) fault(b driver.Backend) *fault {
	return &fault{Backend: b,
		acquire: func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
			if err := p.wait(ctx); err != nil {
				return driver.Grant{}, err
			}
			return next(ctx, req)
		},
		refresh: func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
			if err := p.wait(ctx); err != nil {
				return 0, err
			}
			return next(ctx, l, ttl)
		},
		release: func(ctx context.Context, l driver.Lease, next releaseFunc) error {
			if err := p.wait(ctx); err != nil {
				return err
			}
			return next(ctx, l)
		},
	}
}

func TestElectionPausedLeaderMemlock(t *testing.T) {
	t.Parallel()
	store := memlock.New()
	var p pausing
	t.Cleanup(p.resume)
	testPausedLeader(t, distlock.New(p.fault(store)), distlock.New(store), p.pause)
}

func TestElectionPausedLeaderRedis(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	proxy := testserver.StartProxy(t, srv.Addr())
	t.Cleanup(proxy.Restore)
	client := func(addr string) *distlock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { rdb.Close() })
		b := redislock.New(rdb)
		t.Cleanup(func() { b.Close() })
		return distlock.New(b)
	}
	testPausedLeader(t, client(proxy.Addr()), client(srv.Addr()), proxy.Blackhole)
}

// testPausedLeader has a lead on the client a, then cuts a off from the
// backend with pause. b, waiting, must lead only once a's lease has ended,
// and a's term must be cancelled at its deadline, not later.
func testPausedLeader(t *testing.T, a, b *distlock.Client, pause func()) {
	const ttl = time.Second
	// A release that cannot reach the backend gives up soon.
	ca := campaign(t, a, "scheduler", "a", distlock.WithTTL(ttl), distlock.WithReleaseTimeout(200*time.Millisecond))
	recv(t, ca.leading, 10*time.Second, "a to lead")
	cb := campaign(t, b, "scheduler", "b", distlock.WithTTL(ttl))
	time.Sleep(2 * ttl) // a renews meanwhile: b must not lead
	select {
	case tm := <-cb.leading:
		t.Fatalf("b leads (token %d) while a renews its lease", tm.token)
	default:
	}
	wantLeader(t, cb.e, "a")

	pause()
	old := recv(t, ca.ended, 10*time.Second, "a's term to end after the pause")
	if !errors.Is(old.cause, distlock.ErrLockLost) {
		t.Errorf("a's term ended with cause %v, want ErrLockLost", old.cause)
	}
	// The term ends at its deadline; the bound is loose for loaded machines.
	if late := old.end.Sub(old.validUntil); late > ttl {
		t.Errorf("a's term ended %v after its lease's deadline", late)
	}
	now := recv(t, cb.leading, 10*time.Second, "b to take over")
	if now.start.Before(old.validUntil) {
		t.Fatalf("b leads at %v, %v before a's lease ended", now.start, old.validUntil.Sub(now.start))
	}
	wantLeader(t, cb.e, "b")
}

// TestElectionRetriesBackendErrors: a campaign whose first attempts meet
// backend errors keeps campaigning, as Lock does, instead of returning.
func TestElectionRetriesBackendErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := distlock.New(&fault{Backend: memlock.New(), acquire: failAcquires(3, false, errors.New("connection refused"))}).Election("flaky")
	led := false
	err := e.Run(ctx, func(context.Context, *distlock.Lock) error { led = true; return nil })
	if err != nil || !led {
		t.Fatalf("Run against a backend failing its first attempts: led %v, %v; want to lead", led, err)
	}
}
