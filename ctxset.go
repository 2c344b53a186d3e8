package distlock

import (
	"context"
	"sync"
)

// ctxSet keeps what must be told when a lease ends: the contexts made by
// [Lock.Context] and [MultiLock.Context], and internal hooks. A context
// leaves the set as soon as it ends on its own (its parent was cancelled),
// so a lock held for hours by a server that derives a context per request
// keeps only the live ones.
type ctxSet struct {
	mu     sync.Mutex
	reason error // why the lease ended; nil while it lasts
	next   uint64
	live   map[uint64]func(error)
}

// derive returns a context of parent that is cancelled, with the reason
// as cause, when the set ends.
func (s *ctxSet) derive(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != nil {
		cancel(s.reason)
		return ctx
	}
	id := s.addLocked(nil)
	// Runs when parent ends first; also when end cancels ctx, unless
	// end stopped it in time (then there is nothing left to forget).
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.live, id)
	})
	s.live[id] = func(reason error) {
		stop()
		cancel(reason)
	}
	return ctx
}

// hook makes f run once with the reason when the set ends, or at once if
// it has ended.
func (s *ctxSet) hook(f func(error)) {
	s.mu.Lock()
	if reason := s.reason; reason != nil {
		s.mu.Unlock()
		f(reason)
		return
	}
	s.addLocked(f)
	s.mu.Unlock()
}

// addLocked registers f and returns its id.
func (s *ctxSet) addLocked(f func(error)) uint64 {
	if s.live == nil {
		s.live = make(map[uint64]func(error))
	}
	id := s.next
	s.next++
	s.live[id] = f
	return id
}

// end tells everything registered that the lease ended with reason; the
// first reason wins.
func (s *ctxSet) end(reason error) {
	s.mu.Lock()
	if s.reason != nil {
		s.mu.Unlock()
		return
	}
	s.reason = reason
	live := s.live
	s.live = nil
	s.mu.Unlock()
	for _, f := range live {
		f(reason)
	}
}

// ended returns the reason the set ended with, or nil.
func (s *ctxSet) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// len reports how many contexts and hooks are registered.
func (s *ctxSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
