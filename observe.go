package distlock

import (
	"context"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// An Observer watches what the locks of a client do: every acquisition
// attempt, every grant, renewal, loss and release. Give one with
// [WithObserver]; package distlock/otel records them as OpenTelemetry
// metrics and traces, and [WithLogger] logs them.
//
// Observe is called synchronously, in order for each Lock or TryLock call
// and the holding it returns (EventLost just after [Lock.Done] closes), and from several goroutines at once for
// different calls. It must return quickly and must not call [Lock.Refresh]
// or [Lock.Unlock] (it may run while they wait for it). ctx is the caller's
// context for the events of Lock, TryLock, Refresh and Unlock, and
// context.Background() for the watchdog's renewals and for losses noticed
// by a timer. An Observer that cares about some events ignores the others:
// switch on [Event.Type].
//
// Without an observer, distlock builds no events at all: the cost is one
// nil check per event.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// EventType says what an [Event] reports.
type EventType uint8

// The events, in the order they occur for one Lock or TryLock call: one
// EventAttempt per attempt, then EventAcquired or EventFailed; after
// EventAcquired, any number of EventRenewed and EventRenewalFailed, then
// exactly one of EventLost and EventReleased.
const (
	// EventAttempt: one acquisition attempt returned. Outcome says how;
	// Attempts is its number (from 1), Latency its round trip, Wait the
	// time since the call began, Err the backend's error if any.
	EventAttempt EventType = iota + 1
	// EventAcquired: the call got the lock. Token, Wait (since the call
	// began), Attempts, ValidFor and ValidUntil are set.
	EventAcquired
	// EventFailed: the call returned without the lock. Err is what it
	// returned; Wait and Attempts are set.
	EventFailed
	// EventRenewed: a renewal was confirmed. Latency, the new ValidFor
	// and ValidUntil are set.
	EventRenewed
	// EventRenewalFailed: a renewal's outcome is unknown (Err); the lease
	// lasts until ValidUntil unless a later renewal succeeds.
	EventRenewalFailed
	// EventLost: the lease ended without Unlock. Cause says why, Err is
	// [Lock.Err], Late is how long after ValidUntil the loss was noticed
	// (negative if before), Held how long the lock was held.
	EventLost
	// EventReleased: Unlock ended the holding. Held is how long the lock
	// was held; Err is the release's error, if any (an ErrLockLost when
	// the backend said the lease was no longer ours).
	EventReleased
)

var eventNames = [...]string{"", "attempt", "acquired", "failed", "renewed", "renewal failed", "lost", "released"}

// String returns the event's name, such as "acquired".
func (t EventType) String() string {
	if int(t) < len(eventNames) && t != 0 {
		return eventNames[t]
	}
	return "unknown"
}

// Outcome is the result of one acquisition attempt.
type Outcome uint8

const (
	Granted      Outcome = iota + 1 // the attempt took the lock
	HeldByOther                     // someone else holds it (or is ahead in line)
	AttemptError                    // the backend failed; the outcome is unknown
	Guarded                         // the backend's restart guard held it back (see ErrRestartGuard)
)

var outcomeNames = [...]string{"", "granted", "held", "error", "guarded"}

// String returns "granted", "held", "error" or "guarded".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return "unknown"
}

// LossCause says why a lease was lost.
type LossCause uint8

const (
	// LossRefused: the backend said the lease is no longer ours (a
	// renewal or a release was refused): it expired on the server or was
	// taken over.
	LossRefused LossCause = iota + 1
	// LossExpired: the local deadline passed without a confirmed renewal
	// (the backend did not answer in time).
	LossExpired
	// LossReported: the backend reported the holding gone on its own (a
	// session expired).
	LossReported
)

var lossNames = [...]string{"", "refused", "expired", "reported"}

// String returns "refused", "expired" or "reported".
func (c LossCause) String() string {
	if int(c) < len(lossNames) && c != 0 {
		return lossNames[c]
	}
	return "unknown"
}

// Event is one thing a lock did. Which fields are set depends on Type (see
// the EventType constants); the others are zero. An Event holds no secret:
// no owner token, [OwnerID] or backend URL.
type Event struct {
	Type EventType
	// ID identifies one Lock or TryLock call and the holding it returns:
	// every event of both carries it. Unique within the process.
	ID      uint64
	Key     string
	Kind    Kind   // what the lock takes: KindMutex, KindWrite, KindRead or KindPermit
	Backend string // the backend's package name, such as "redislock"

	Token      uint64        // EventAcquired and later
	Outcome    Outcome       // EventAttempt
	Attempts   int           // EventAttempt: its number; EventAcquired, EventFailed: how many
	Wait       time.Duration // EventAttempt, EventAcquired, EventFailed: since the call began
	Latency    time.Duration // EventAttempt, EventRenewed, EventRenewalFailed: the round trip
	ValidFor   time.Duration // EventAcquired, EventRenewed: the validity granted
	ValidUntil time.Time     // EventAcquired and later: the lease's deadline
	Held       time.Duration // EventLost, EventReleased: since the lock was acquired
	Late       time.Duration // EventLost: when it was noticed, relative to ValidUntil
	Cause      LossCause     // EventLost
	Err        error
}

// WithObserver adds o to the observers of the locks: given to [New], it
// watches every lock of the client; given to [Client.Mutex] (or RWMutex,
// Semaphore), that lock too, after the client's observers. A nil o is
// ignored, and so is an observer given already (to the client and again
// to the lock), so that it sees each event once.
func WithObserver(o Observer) Option {
	return func(opts *options) {
		if o == nil {
			return
		}
		for _, have := range opts.observers {
			if sameObserver(have, o) {
				return // given to the client and to the lock: once
			}
		}
		// A fresh slice: options are copied from the client to each mutex.
		opts.observers = append(opts.observers[:len(opts.observers):len(opts.observers)], o)
	}
}

// sameObserver reports whether a and b are the same observer: equal
// values of one comparable type (an ObserverFunc, a func, never is).
func sameObserver(a, b Observer) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// observers calls several observers in turn.
type observers []Observer

func (os observers) Observe(ctx context.Context, e Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

// observer returns what observes the locks of o: nil if nothing does.
func (o *options) observer() Observer {
	all := o.observers
	if o.logger != nil {
		all = append(all[:len(all):len(all)], logObserver{o.logger})
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return observers(all)
}

// callIDs numbers the observed calls.
var callIDs atomic.Uint64

// backendName names b's package: "redislock" for *redislock.Backend. A
// wrapper that embeds a Backend (for metrics, faults, limits) is named
// after the backend it wraps.
func backendName(b driver.Backend) string {
	v := reflect.ValueOf(b)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).Anonymous || !f.CanInterface() {
				continue
			}
			if inner, ok := f.Interface().(driver.Backend); ok && inner != nil && !isNil(inner) {
				return backendName(inner)
			}
		}
	}
	if p := v.Type().PkgPath(); p != "" {
		return path.Base(p)
	}
	return v.Type().String()
}

// event returns the event of type t for d, with what every event carries.
func (d *desc) event(t EventType, id uint64) Event {
	return Event{Type: t, ID: id, Key: d.key, Kind: Kind(d.kind), Backend: d.c.name}
}

// A Lock or TryLock call and the holding it returns are observed through
// two calls each: a call reports with [call.attempt] and [call.failed], a
// holding with [Lock.reportLocked], whose events [Lock.unlockAndReport]
// delivers once the handle's mutex is free. Without an observer each is one
// nil check, and no event is built.

// call is the observed state of one Lock or TryLock call; its zero value,
// without an observer, records nothing.
type call struct {
	obs      Observer
	d        *desc
	id       uint64
	began    time.Time
	attempts int
}

// startCall begins observing a call of d.
func (d *desc) startCall() call {
	if d.obs == nil {
		return call{}
	}
	return call{obs: d.obs, d: d, id: callIDs.Add(1), began: time.Now()}
}

// attempt reports an attempt that started at start and returned g and err.
func (cl *call) attempt(ctx context.Context, start time.Time, g driver.Grant, err error) {
	if cl.obs == nil {
		return
	}
	cl.attempts++
	now := time.Now()
	e := cl.d.event(EventAttempt, cl.id)
	e.Attempts, e.Latency, e.Wait = cl.attempts, now.Sub(start), now.Sub(cl.began)
	switch {
	case err != nil:
		e.Outcome, e.Err = AttemptError, err
	case g.Acquired:
		e.Outcome = Granted
	case g.Guarded:
		e.Outcome = Guarded
	default:
		e.Outcome = HeldByOther
	}
	cl.obs.Observe(ctx, e)
}

// failed reports that the call returns err without the lock, and returns err.
func (cl *call) failed(ctx context.Context, err error) error {
	if cl.obs != nil {
		e := cl.d.event(EventFailed, cl.id)
		e.Attempts, e.Wait, e.Err = cl.attempts, time.Since(cl.began), err
		cl.obs.Observe(ctx, e)
	}
	return err
}

// holding returns the observation state of the lock the call got, nil
// without an observer.
func (cl *call) holding() *observed {
	if cl.obs == nil {
		return nil
	}
	return &observed{Observer: cl.obs, id: cl.id, began: cl.began, attempts: cl.attempts}
}

// observed is the observation state of a Lock.
type observed struct {
	Observer
	id       uint64    // the Event.ID of the call that took the lock
	began    time.Time // when that call began, for EventAcquired's Wait
	attempts int       // how many attempts it made
	acquired time.Time // when the grant arrived, for Event.Held
	queue    []pending // events recorded under Lock.mu, reported by unlockAndReport
	emitting sync.Mutex
}

// pending is an event of a Lock recorded under l.mu, reported after it.
type pending struct {
	ctx context.Context
	e   Event
}

// reportLocked queues the event of type t about the holding, for
// unlockAndReport to deliver once l.mu is free. It sets what every event
// of its type carries; fill sets the rest. Without an observer it does
// nothing.
func (l *Lock) reportLocked(ctx context.Context, t EventType, fill func(e *Event)) {
	if l.obs == nil {
		return
	}
	now := time.Now()
	e := l.d.event(t, l.obs.id)
	e.Token, e.ValidUntil = l.token, l.validUntil
	switch t {
	case EventAcquired:
		l.obs.acquired = now
		e.Wait, e.Attempts = now.Sub(l.obs.began), l.obs.attempts
	case EventLost:
		e.Late, e.Held = now.Sub(l.validUntil), now.Sub(l.obs.acquired)
	case EventReleased:
		e.Held = now.Sub(l.obs.acquired)
	}
	// fill writes into the queue, which is on the heap anyway: a pointer to
	// a local Event would move each event there.
	l.obs.queue = append(l.obs.queue, pending{ctx, e})
	fill(&l.obs.queue[len(l.obs.queue)-1].e)
}

// unlockAndReport unlocks l.mu and reports the events recorded under it,
// in order: taking emitting before letting go of l.mu keeps the order of
// events recorded by different goroutines, and the observer runs without
// l.mu.
func (l *Lock) unlockAndReport() {
	if l.obs == nil || len(l.obs.queue) == 0 {
		l.mu.Unlock()
		return
	}
	q := l.obs.queue
	l.obs.queue = nil
	l.obs.emitting.Lock()
	l.mu.Unlock()
	defer l.obs.emitting.Unlock()
	for _, p := range q {
		l.obs.Observe(p.ctx, p.e)
	}
}
