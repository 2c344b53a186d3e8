package distlock

import (
	"context"
	"sync"

	"github.com/distlock-go/distlock/driver"
)

// Goroutines of one Client that wait for the same plain mutex take turns
// asking the backend: one of them at a time waits on the backend, the
// others wait in line here, in arrival order, and the next one starts
// asking when the current one got the lock or gave up. So a process is one
// waiter on the backend whatever the number of its goroutines: a release
// wakes one of its goroutines, not all of them, and its goroutines get the
// lock in the order they asked, while other processes see no herd.
//
// Only plain mutexes wait in line: fair waiters already keep their order on
// the backend, where each needs its own place; and a re-entrant lock, a
// side of a read-write lock or a permit of a semaphore can be held by
// several goroutines at once, so none may wait behind another.

// lines holds a Client's lines, by key; a line exists while a goroutine
// is in it.
type lines struct {
	mu    sync.Mutex
	m     map[string]*line
	spare *line // an idle line kept for reuse: the uncontended Lock allocates none
}

// line is the turn of one key's waiters.
type line struct {
	busy    bool            // a goroutine is asking the backend
	waiting []chan struct{} // the others, in order; closed to give the turn
	refs    int             // goroutines holding or awaiting the turn
}

// inLine reports whether a Lock of req waits in line.
func inLine(req driver.Request) bool {
	return req.Kind == driver.Exclusive && !req.Fair && req.Reentry == ""
}

// enter waits for the turn to ask the backend for key and returns its
// line, to be given to leave once. It returns ctx's error if ctx ends
// first.
func (ls *lines) enter(ctx context.Context, key string) (*line, error) {
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = make(map[string]*line)
	}
	l := ls.m[key]
	if l == nil {
		if l = ls.spare; l != nil {
			ls.spare = nil
		} else {
			l = &line{}
		}
		ls.m[key] = l
	}
	l.refs++
	if !l.busy {
		l.busy = true
		ls.mu.Unlock()
		return l, nil
	}
	turn := make(chan struct{})
	l.waiting = append(l.waiting, turn)
	ls.mu.Unlock()
	select {
	case <-turn:
		return l, nil
	case <-ctx.Done():
	}
	ls.mu.Lock()
	select {
	case <-turn: // given the turn as ctx ended: pass it on
		ls.mu.Unlock()
		ls.leave(key, l)
		return nil, ctx.Err()
	default:
	}
	for i, c := range l.waiting {
		if c == turn {
			l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
			break
		}
	}
	ls.dropLocked(key, l)
	ls.mu.Unlock()
	return nil, ctx.Err()
}

// leave gives l's turn to its next waiter, if any.
func (ls *lines) leave(key string, l *line) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(l.waiting) > 0 {
		next := l.waiting[0]
		l.waiting[0] = nil
		l.waiting = l.waiting[1:]
		close(next)
	} else {
		l.busy = false
	}
	ls.dropLocked(key, l)
}

// dropLocked forgets one goroutine of l, and l once none is left (nothing
// refers to it then, so it may be reused).
func (ls *lines) dropLocked(key string, l *line) {
	if l.refs--; l.refs > 0 {
		return
	}
	delete(ls.m, key)
	if ls.spare == nil {
		*l = line{waiting: l.waiting[:0]}
		ls.spare = l
	}
}
