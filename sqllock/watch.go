package sqllock

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	if b.listener == nil || (b.autoListen && b.db.Stats().MaxOpenConnections == 1) {
		// A pool of one connection has none to spare for listening.
		return b.watchLocal(ctx, key, owner)
	}
	h := &b.hub
	w := &watch{h: h, key: key, owner: owner, c: make(chan struct{}, 1)}
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

type watch struct {
	h          *hub
	key, owner string // owner: a fair waiter's, or ""
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
