package distlock

import (
	"context"
	"path"
	"reflect"
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
	Kind    driver.Kind
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

// event returns the event of type t for m, with what every event carries.
func (m *Mutex) event(t EventType, id uint64) Event {
	return Event{Type: t, ID: id, Key: m.key, Kind: m.kind, Backend: m.c.name}
}

// pending is an event of a Lock recorded under l.mu, reported after it.
type pending struct {
	ctx context.Context
	e   Event
}
