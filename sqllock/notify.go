package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/distlock-go/distlock/driver"
)

// Listener is a dedicated connection that receives PostgreSQL
// notifications, for [WithListener]. Package sqllock/pglisten implements
// it on a *sql.DB of the pgx driver; it lives in its own package so that
// sqllock builds on database/sql alone.
type Listener interface {
	// Listen runs until ctx is done, then returns. It executes LISTEN on
	// channel (a plain identifier), calls ready once the server has
	// confirmed it, and calls notice with the payload of each
	// notification. After losing its connection it reconnects and calls
	// ready again: notifications sent meanwhile are lost, and ready
	// stands for all of them. It returns early only with an error that
	// no retry can mend (a connection of another driver, say).
	Listen(ctx context.Context, channel string, ready func(), notice func(payload string)) error
}

// WithListener makes waiters on PostgreSQL wait for notifications
// (Capabilities.Notify) instead of polling: Release sends pg_notify in its
// statement, and l receives them on one connection for the backend, opened
// by the first Watch and closed by Close. New rejects it on other dialects.
// The channel is "distlock_" and the table's name in lower case, its dot
// an underscore (distlock_distlock_leases by default), or "distlock_" and
// 32 hex digits of its SHA-256 where that would exceed PostgreSQL's 63
// bytes.
func WithListener(l Listener) Option { return func(b *Backend) { b.listener = l } }

// maxChannel is PostgreSQL's limit on identifiers, channel names
// included: NAMEDATALEN-1 bytes.
const maxChannel = 63

// channel is the notification channel of the lease table, the same for
// the sender (pg_notify) and the listener: "distlock_" and the table's
// name in lower case, its dot made an underscore, or, when that is longer
// than PostgreSQL takes, "distlock_" and 32 hex digits of the SHA-256 of
// the name in lower case. Lower case, since PostgreSQL folds unquoted
// names: "Locks" and "locks" are one table, and share one channel.
func channel(table string) string {
	table = strings.ToLower(table)
	if c := "distlock_" + strings.ReplaceAll(table, ".", "_"); len(c) <= maxChannel {
		return c
	}
	sum := sha256.Sum256([]byte(table))
	return "distlock_" + hex.EncodeToString(sum[:16])
}

// hub dispatches the listener's notifications to the watches of keys.
type hub struct {
	mu       sync.Mutex
	watches  map[string]map[*watch]struct{}
	started  bool
	ready    chan struct{} // closed when LISTEN is first confirmed
	done     chan struct{} // closed when the listener returns
	err      error         // the listener's error, once done
	cancel   context.CancelFunc
	isReady  bool
	isClosed bool
}

// start runs the listener once, in the background.
func (b *Backend) startListener() {
	h := &b.hub
	if h.started {
		return
	}
	h.started = true
	h.ready, h.done = make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		err := b.listener.Listen(ctx, channel(b.table), h.onReady, h.onNotice)
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}()
}

// onReady marks LISTEN in place and wakes every watch: notifications may
// have been missed while the connection was down.
func (h *hub) onReady() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isReady {
		h.isReady = true
		close(h.ready)
	}
	for _, set := range h.watches {
		for w := range set {
			w.wake()
		}
	}
}

func (h *hub) onNotice(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[key] {
		w.wake()
	}
}

// Watch implements driver.Backend. With [WithListener] on PostgreSQL, the
// first call opens the listening connection; each call returns once LISTEN
// is confirmed. Otherwise waiters poll, and it returns an error wrapping
// errors.ErrUnsupported.
func (b *Backend) Watch(ctx context.Context, key, _ string) (driver.Watch, error) {
	if err := b.valid(); err != nil {
		return nil, err
	}
	if b.listener == nil {
		return nil, fmt.Errorf("sqllock: watching releases (PostgreSQL with WithListener only): %w", errors.ErrUnsupported)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	h := &b.hub
	w := &watch{h: h, key: key, c: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.isClosed {
		h.mu.Unlock()
		return nil, errors.New("sqllock: Watch on a closed backend")
	}
	b.startListener()
	if h.watches == nil {
		h.watches = make(map[string]map[*watch]struct{})
	}
	if h.watches[key] == nil {
		h.watches[key] = make(map[*watch]struct{})
	}
	h.watches[key][w] = struct{}{}
	ready, done := h.ready, h.done
	h.mu.Unlock()
	select {
	case <-ready:
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

// closeListener stops the listener and waits for it.
func (b *Backend) closeListener() {
	h := &b.hub
	h.mu.Lock()
	h.isClosed = true
	started := h.started
	h.mu.Unlock()
	if started {
		h.cancel()
		<-h.done
	}
}

type watch struct {
	h    *hub
	key  string
	c    chan struct{}
	once sync.Once
}

func (w *watch) wake() {
	select {
	case w.c <- struct{}{}:
	default: // one pending wake-up is enough
	}
}

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.h.mu.Lock()
		defer w.h.mu.Unlock()
		set := w.h.watches[w.key]
		delete(set, w)
		if len(set) == 0 {
			delete(w.h.watches, w.key)
		}
	})
	return nil
}
