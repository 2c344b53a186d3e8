package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"
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

// WithListener sets how a backend on PostgreSQL receives the
// notifications of releases: Release sends pg_notify in its statement, and
// l receives them on one connection for the backend, opened by the first
// Watch and closed by Close. A backend on pgx's driver has a listener of
// its own without it; WithListener(nil) turns listening off, leaving
// waiters to the wake-ups of their own process and their poll (see the
// package doc). New rejects a listener on other dialects.
// The channel is "distlock_" and the table's name in lower case, its dot
// an underscore (distlock_distlock_leases by default), or "distlock_" and
// 32 hex digits of its SHA-256 where that would exceed PostgreSQL's 63
// bytes.
func WithListener(l Listener) Option {
	return func(b *Backend) { b.listener, b.listenerSet = l, true }
}

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
	watches  watchSet[*watch]
	started  bool
	ready    chan struct{} // closed when LISTEN is first confirmed
	done     chan struct{} // closed when the listener returns
	err      error         // the listener's error, once done
	cancel   context.CancelFunc
	isReady  bool
	isClosed bool
	marked   map[string]time.Time // when this process last marked a key's row (see marks.go)
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
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			if b.markStmt.query != "" {
				b.renewMarks(ctx)
			}
		}()
		err := b.listener.Listen(ctx, channel(b.table), h.onReady, h.onNotice)
		cancel()
		<-renewed
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}()
}

// onReady marks LISTEN in place and, when it is in place again after a
// lost connection, wakes every watch: notifications may have been missed
// while the connection was down.
func (h *hub) onReady() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isReady {
		// The first LISTEN: no Watch has returned before it, so none
		// can have missed a notice.
		h.isReady = true
		close(h.ready)
		return
	}
	for _, set := range h.watches {
		for w := range set {
			w.wake()
		}
	}
}

// onNotice wakes the watches of the key a notice names. A release that
// handed the lease to a fair waiter names the waiter too, between commas
// before the key (see turn): only that waiter's watches wake. A key that
// begins with a comma reads both ways, which wakes a watch for nothing at
// worst.
func (h *hub) onNotice(payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[payload] {
		w.wake()
	}
	if !strings.HasPrefix(payload, ",") {
		return
	}
	owner, key, ok := strings.Cut(payload[1:], ",")
	if !ok {
		return
	}
	for w := range h.watches[key] {
		if w.owner == owner {
			w.wake()
		}
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
