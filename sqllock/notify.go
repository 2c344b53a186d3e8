package sqllock

import (
	"context"
	"crypto/rand"
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

	// The listener's place in the keys' wakers (see marks.go).
	id      string            // its name there: random, one per backend
	listed  map[string]bool   // keys whose wakers list it, as far as it knows
	namings uint64            // the releases that named it so far
	heard   map[string]uint64 // marked keys: the notices of each that woke all or a fair waiter
	epoch   uint64            // bumped when LISTEN is back after a lost connection, or a mark is forgotten
	chores  sync.WaitGroup    // what its turns started: a new mark, a turn passed on
	ctx     context.Context   // the listener's: done when it stops
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
	h.cancel, h.ctx = cancel, ctx
	h.id = listenerName()
	go func() {
		defer close(h.done)
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			if b.markStmt.query != "" {
				b.renewMarks(ctx)
			}
		}()
		err := b.listener.Listen(ctx, channel(b.table), h.onReady, b.onNotice)
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
	h.epoch++
	for _, set := range h.watches {
		for w := range set {
			w.wake()
		}
	}
}

// onNotice wakes the watches of the key a notice names. A release of a
// mutex names the listener whose turn it is, between semicolons before
// the key: that listener wakes one waiter (see named), the others none.
// A release that handed the lease to a fair waiter names the waiter,
// between commas before the key (see turn): only that waiter's watches
// wake. A key that begins with a comma or a semicolon reads both ways,
// which wakes a watch for nothing at worst.
func (b *Backend) onNotice(payload string) {
	h := &b.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[payload] {
		w.wake()
	}
	h.hear(payload)
	if payload == "" {
		return
	}
	sep := payload[0]
	if sep != ',' && sep != ';' {
		return
	}
	name, key, ok := strings.Cut(payload[1:], string(sep))
	switch {
	case !ok:
	case sep == ';':
		if name == h.id {
			b.named(key)
		}
	default:
		h.hear(key)
		for w := range h.watches[key] {
			if w.owner == name {
				w.wake()
			}
		}
	}
}

// name is the listener's name in the keys' wakers, or "" before it
// starts.
func (h *hub) name() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

// hear counts a notice of key for WatchMark, if this process marked key.
func (h *hub) hear(key string) {
	if _, ok := h.marked[key]; !ok {
		return
	}
	if h.heard == nil {
		h.heard = make(map[string]uint64)
	}
	h.heard[key]++
}

// listenerName is a new listener's name in the keys' wakers: 64 random
// bits in hex, which no comma or semicolon can be part of.
func listenerName() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
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
		h.chores.Wait()
	}
}
