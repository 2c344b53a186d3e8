package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Election lets one process of many lead, in the spirit of etcd's
// concurrency.Election and Kubernetes' leaderelection: the leader is the
// holder of a [Mutex] on the election's key. [Election.Run] campaigns,
// runs the leader's work while the lease lasts and campaigns again after a
// loss; [Election.Leader] tells anyone who leads now.
//
// Leading is a lease like any lock: a paused or partitioned leader stops
// leading at [Lock.ValidUntil] while it may still be running. The work
// therefore runs under a context that is cancelled at that moment, and
// should pass [Lock.Token] to what it writes to (see package fence).
//
// Set the fields before calling Run; an Election may run in one goroutine
// at a time.
type Election struct {
	// Backoff paces campaigns after a lost term: the n-th loss in a row
	// waits Backoff.Next(n) before campaigning again, so that a leader
	// that keeps losing its lease (a flaky network, an overloaded host)
	// does not keep winning it back for moments at a time. A term that
	// lasted at least its TTL resets the count. Nil means exponential
	// from 100ms to 5s, with jitter.
	Backoff Backoff

	m          *Mutex
	term       atomic.Pointer[Lock] // the term Run leads now, or nil
	campaigned chan struct{}        // closed when the first campaign has an outcome
	once       sync.Once
}

// defaultElectionBackoff paces campaigns when Election.Backoff is nil.
var defaultElectionBackoff = ExponentialBackoff(100*time.Millisecond, 5*time.Second)

// Election returns the election named key. The options are those of the
// leader's [Mutex]: [WithTTL] bounds how long a leader that crashed or
// stalled keeps others from leading, and [WithMetadata] is how a candidate
// names itself to [Election.Leader] (e.g. {"id": "scheduler-a"}). An
// election is never re-entrant: [WithOwner] is an invalid option for it,
// and an [OwnerID] carried by Run's context is ignored, so that candidates
// sharing an identity still exclude each other. Invalid
// keys and options are reported by Run and Leader. Like Client.Mutex it
// holds nothing by itself.
func (c *Client) Election(key string, opts ...Option) *Election {
	m := c.Mutex(key, opts...)
	m.d.single = true
	return &Election{m: m, campaigned: make(chan struct{})}
}

// Key returns the election's name.
func (e *Election) Key() string { return e.m.d.key }

// Run campaigns until ctx is done. Each time this process wins, Run calls
// fn with the term's [Lock] and a context that is cancelled when the lease
// is lost (the cause is the Lock's error) or ctx is done; fn must then
// return promptly, since another process may lead from that moment.
//
//   - When the lease is lost, Run waits for fn to return, pauses (see
//     Election.Backoff) and campaigns again; what fn returned is dropped.
//   - When fn returns while still leading, Run resigns (unlocks, so
//     that another candidate leads at once) and returns fn's error: a nil
//     error from fn ends the campaign too.
//   - When ctx is done, Run waits for fn to return, resigns, and returns
//     ctx.Err().
//
// A key or option the backend refuses is returned at once; backend errors
// while campaigning are retried as [Mutex.Lock] retries them. fn must not
// unlock the Lock itself: returning is how it resigns. The fn of a single
// Run is never called concurrently with itself.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context, term *Lock) error) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil leader function", ErrInvalidArgument)
	}
	backoff := e.Backoff
	if backoff == nil {
		backoff = defaultElectionBackoff
	}
	defer e.decided() // whatever happens, the first campaign is over
	losses := 0
	for {
		l, err := e.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		start := time.Now()
		e.term.Store(l)
		e.decided()
		lost, err := e.lead(ctx, l, fn)
		e.term.Store(nil)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !lost:
			return err
		}
		if time.Since(start) >= e.m.d.opts.ttl {
			losses = 0
		}
		losses++
		t := time.NewTimer(backoff.Next(losses))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// campaign waits until this process leads. Its first attempt does not
// wait, so that Campaigned can tell when someone else leads; after a
// failed one, Lock retries a backend error as usual and returns at once
// for what a retry cannot mend (an invalid key, say).
func (e *Election) campaign(ctx context.Context) (*Lock, error) {
	l, err := e.m.TryLock(ctx)
	if err == nil || ctx.Err() != nil {
		return l, err
	}
	if errors.Is(err, ErrNotObtained) {
		e.decided() // someone else leads
	}
	return e.m.Lock(ctx)
}

// decided marks the first campaign's outcome as known.
func (e *Election) decided() {
	if e.campaigned != nil {
		e.once.Do(func() { close(e.campaigned) })
	}
}

// Leading reports whether this process leads now: Run is in a term whose
// lease has not ended. Like any lease, leading may end right after it
// returns; work that must not outlive the term runs in Run's function,
// under its context.
func (e *Election) Leading() bool {
	l := e.term.Load()
	return l != nil && l.Err() == nil && time.Now().Before(l.ValidUntil())
}

// Campaigned returns a channel that is closed once Run's first campaign
// has an outcome: this process leads, another one does, or Run returned.
// [Election.Leading] then tells which. It lets a caller that runs the
// election in the background wait for it before its first decision.
func (e *Election) Campaigned() <-chan struct{} {
	if e.campaigned == nil { // an Election not made by Client.Election
		return closed
	}
	return e.campaigned
}

// closed is a closed channel.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// lead runs one term: fn under l until it returns, then the resignation.
// It reports whether the lease was lost before fn returned, and fn's error.
func (e *Election) lead(ctx context.Context, l *Lock, fn func(context.Context, *Lock) error) (lost bool, err error) {
	// Resign even if fn panics. A lease lost to an unreachable backend
	// must not hold up the next campaign: the release is bounded.
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.m.d.opts.releaseTimeout)
		defer cancel()
		_ = l.Unlock(uctx) // a lost lease reports ErrLockLost: nothing to do
	}()
	err = fn(l.Context(ctx), l)
	return l.Err() != nil, err
}

// Leader describes the current leader of the election: Held is false when
// nobody leads, and Meta is what the leader stored with [WithMetadata]
// ("host" and "pid" by default). It is [Client.Inspect] of the election's
// key, so the backend must keep metadata for Meta to be filled, and the
// answer may have changed by the time it returns.
func (e *Election) Leader(ctx context.Context) (Info, error) {
	return e.m.d.c.Inspect(ctx, e.m.d.key)
}
