package sqllock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend. A release made in this process wakes
// the watch at once; on PostgreSQL with a listener, the first call opens
// the listening connection and each call returns once LISTEN is
// confirmed; otherwise the watch polls the key's row (see the package
// doc). With owner (a fair waiter's), the watch wakes only when it is
// that waiter's turn.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.valid(); err != nil {
		return nil, err
	}
	if err := driver.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("sqllock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	if !b.listens() {
		return b.watchLocal(ctx, key, owner)
	}
	h := &b.hub
	w := &watch{h: h, key: key, owner: owner, seq: watchSeq.Add(1), c: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.isClosed {
		h.mu.Unlock()
		return nil, errors.New("sqllock: Watch on a closed backend")
	}
	b.startListener()
	if h.watches == nil {
		h.watches = make(watchSet[*watch])
	}
	h.watches.add(key, w)
	ready, done := h.ready, h.done
	h.mu.Unlock()
	select {
	case <-ready:
		if b.markStmt.query != "" {
			b.markWatched(ctx, key, false)
		}
		return w, nil
	case <-done:
		w.Close()
		h.mu.Lock()
		err := h.err
		h.mu.Unlock()
		return nil, fmt.Errorf("sqllock: listening for releases: %w", err)
	case <-ctx.Done():
		w.Close()
		return nil, fmt.Errorf("sqllock: listening for releases: %w", ctx.Err())
	}
}

var _ driver.MarkWatcher = (*Backend)(nil)

// listens reports whether b's waiters hear releases through its
// listener. A pool of one connection has none to spare for listening.
func (b *Backend) listens() bool {
	return b.listener != nil && !(b.autoListen && b.db.Stats().MaxOpenConnections == 1)
}

// WatchMark implements driver.MarkWatcher: with a listener that is in
// place, on a key whose row this process marked as watched lately (so
// that a release notifies), it counts the notices of key that wake every
// waiter or a fair waiter, and the listener's reconnections; 0 otherwise.
// A notice that names another listener does not count: that listener's
// waiter tries, and this one need not.
func (b *Backend) WatchMark(key string) uint64 {
	if !b.listens() || b.markStmt.query == "" {
		return 0
	}
	h := &b.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.marked[key]
	if !h.isReady || !ok || time.Since(at) >= markFor/2 {
		return 0
	}
	return h.epoch<<40 | (h.heard[key]+1)&(1<<40-1)
}

// WatchSince implements driver.MarkWatcher: missed unless mark is
// WatchMark's and nothing it counts happened since.
func (b *Backend) WatchSince(ctx context.Context, key, owner string, mark uint64) (driver.Watch, bool, error) {
	w, err := b.Watch(ctx, key, owner)
	if err != nil || mark == 0 {
		return w, true, err
	}
	return w, b.WatchMark(key) != mark, nil
}

type watch struct {
	h          *hub
	key, owner string // owner: a fair waiter's, or ""
	seq        uint64 // when it began (watchSeq): a turn wakes the first
	c          chan struct{}
	once       sync.Once
}

func (w *watch) wake() { ring(w.c) }

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.h.mu.Lock()
		defer w.h.mu.Unlock()
		w.h.watches.remove(w.key, w)
	})
	return nil
}
