package distlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// MultiLock holds several locks as one: taken all or none, released
// together, and lost as soon as any one of them is lost.
type MultiLock struct {
	locks  []*Lock
	ctx    context.Context // cancelled, with the first loss as cause, when any lock ends
	cancel context.CancelCauseFunc
	ctxs   ctxSet // the contexts made by Context
}

// LockAll takes every mutex, waiting for each as [Mutex.Lock] does, and
// returns them held together. The mutexes are taken in a fixed order (by
// key), so callers that lock overlapping sets in any order cannot deadlock.
// If a lock cannot be taken before ctx ends, LockAll releases the ones it
// took and returns the error: all or none.
//
// Each key may appear once, whatever the clients of its mutexes: two
// mutexes with the same key are an error ([ErrInvalidArgument]). On clients
// of one store they are the same lock, and the second would wait for the
// first until ctx ends; distlock cannot tell whether two backends reach the
// same server, and mutexes with equal keys on different stores could not be
// ordered the same way by every caller.
func LockAll(ctx context.Context, ms ...*Mutex) (*MultiLock, error) {
	return lockAll(ctx, ms, (*Mutex).Lock)
}

// TryLockAll is LockAll with one attempt per mutex, as [Mutex.TryLock]: it
// returns [ErrNotObtained], holding none, if any of them is held elsewhere.
func TryLockAll(ctx context.Context, ms ...*Mutex) (*MultiLock, error) {
	return lockAll(ctx, ms, (*Mutex).TryLock)
}

func lockAll(ctx context.Context, ms []*Mutex, take func(*Mutex, context.Context) (*Lock, error)) (*MultiLock, error) {
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: no mutexes to lock", ErrInvalidArgument)
	}
	if slices.Contains(ms, nil) {
		return nil, fmt.Errorf("%w: nil mutex", ErrInvalidArgument)
	}
	order := slices.Clone(ms)
	slices.SortFunc(order, func(a, b *Mutex) int { return cmp.Compare(a.d.key, b.d.key) })
	for i := 1; i < len(order); i++ { // sorted: equal keys are neighbours
		if order[i].d.key == order[i-1].d.key {
			return nil, fmt.Errorf("%w: key %q given twice", ErrInvalidArgument, order[i].d.key)
		}
	}
	ml := &MultiLock{locks: make([]*Lock, 0, len(order))}
	for _, m := range order {
		l, err := take(m, ctx)
		if err != nil {
			// Give back what was taken. Unlock releases even when ctx
			// is done, detached from it and bounded by the release
			// timeout.
			_ = ml.releaseAll(ctx)
			return nil, err
		}
		ml.locks = append(ml.locks, l)
	}
	ml.ctx, ml.cancel = context.WithCancelCause(context.Background())
	for _, l := range ml.locks {
		l.ctxs.hook(ml.end)
	}
	return ml, nil
}

// Locks returns the held locks, in the order they were taken (by key), for
// their fencing tokens.
func (ml *MultiLock) Locks() []*Lock { return slices.Clone(ml.locks) }

// Done is closed when any of the locks ends: lost, expired, or released.
func (ml *MultiLock) Done() <-chan struct{} { return ml.ctx.Done() }

// Err returns nil while every lock is held, and otherwise the reason the
// first one ended.
func (ml *MultiLock) Err() error {
	if ml.ctx.Err() == nil {
		return nil
	}
	return context.Cause(ml.ctx)
}

// Context returns a context derived from parent that is cancelled when any
// of the locks ends, with [MultiLock.Err] as its cause. Like
// [Lock.Context], it is forgotten as soon as parent ends.
func (ml *MultiLock) Context(parent context.Context) context.Context {
	return ml.ctxs.derive(parent)
}

// end ends the multi-lock with reason; the first reason wins. The
// contexts of Context end before Done closes, so that a caller woken by
// Done finds them ended, with the same cause as Err.
func (ml *MultiLock) end(reason error) {
	ml.ctxs.end(reason)
	ml.cancel(ml.ctxs.ended())
}

// registered reports how many contexts the multi-lock keeps.
func (ml *MultiLock) registered() int { return ml.ctxs.len() }

// Unlock releases every lock, in reverse order, and returns their errors
// joined (see [Lock.Unlock]); it tries them all even if some fail.
func (ml *MultiLock) Unlock(ctx context.Context) error {
	err := ml.releaseAll(ctx)
	ml.end(ErrLockReleased)
	return err
}

// releaseAll releases every lock, in reverse order, and returns their
// errors joined.
func (ml *MultiLock) releaseAll(ctx context.Context) error {
	var errs []error
	for _, l := range slices.Backward(ml.locks) {
		errs = append(errs, l.Unlock(ctx))
	}
	return errors.Join(errs...)
}
