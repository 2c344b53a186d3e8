package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// heldSet keeps the leases a Client holds, so that [Client.Close] can
// release them. Once closed it takes no more: a grant that arrives after
// Close is given back, not held by a client nobody will unlock.
type heldSet struct {
	mu     sync.Mutex
	closed bool
	locks  map[*Lock]struct{}
	// done is cancelled by Close: calls waiting for a lock end with it.
	done   context.Context
	cancel context.CancelCauseFunc
}

// closingLocked returns the context that Close cancels.
func (s *heldSet) closingLocked() context.Context {
	if s.done == nil {
		s.done, s.cancel = context.WithCancelCause(context.Background())
	}
	return s.done
}

// add keeps l and reports true, or reports false if the set is closed.
func (s *heldSet) add(l *Lock) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.locks == nil {
		s.locks = make(map[*Lock]struct{})
	}
	s.locks[l] = struct{}{}
	return true
}

// remove forgets l, whose lease has ended.
func (s *heldSet) remove(l *Lock) {
	s.mu.Lock()
	delete(s.locks, l)
	s.mu.Unlock()
}

// close closes the set and returns the locks it held; first reports
// whether this call closed it.
func (s *heldSet) close() (locks []*Lock, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	s.closingLocked()
	s.cancel(ErrClientClosed)
	for l := range s.locks {
		locks = append(locks, l)
	}
	s.locks = nil
	return locks, true
}

func (s *heldSet) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// bind returns ctx, cancelled also when the set closes, and the function
// that frees what bind set up.
func (s *heldSet) bind(ctx context.Context) (context.Context, func()) {
	s.mu.Lock()
	done := s.closingLocked()
	s.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(done, func() { cancel(ErrClientClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// closedErr returns err joined with ErrClientClosed if the call ended
// because ctx, made by bind, was cancelled by Close.
func closedErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrClientClosed) && !errors.Is(err, ErrClientClosed) {
		return fmt.Errorf("%w: %w", err, ErrClientClosed)
	}
	return err
}
