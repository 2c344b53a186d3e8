package sqllock

import (
	"context"
	"time"
)

// On PostgreSQL a release notifies the key's waiters only if one of them
// marked the key's row (its waiting_us lasts): a release nobody waits for
// sends no pg_notify, which costs a commit about as much as the release
// itself. A watch marks the row when it begins, once LISTEN is in place
// and before the waiter's next attempt, so a release after that attempt
// finds the mark; the listener renews the marks of the keys it watches
// while they are watched. A mark lasts markFor; one that has more than
// half of it left is not written again, and this process remembers the
// marks it wrote, so that a waiter that begins while its key is marked
// costs no statement.
//
// A mutex's release wakes one waiter, not all: the mark also puts the
// backend's listener (a random name, one per backend) last in the key's
// wakers, and the release takes the first listener out and names it in
// its notice (see dialect.releaseOne). That listener wakes its waiter of
// the key that began first; the other listeners' waiters sleep on, up to
// their safety poll and never past the holder's remaining lease (the
// root's wait). A waiter that loses the lock to another after its turn
// lists its listener again with its refused attempt (relist); a listener
// named for a key it no longer waits on passes the turn on (passOn); a
// listener that vanished costs the waiters one safety poll, as its turn
// is taken with its name. With no listener in the wakers, the release
// wakes every waiter, as a release of readers or permits does.
//
// The named listener's waiter has the key for a turn (turnFor, 20ms)
// after the release: an attempt from another backend, the releasing one
// above all, which asks again at once, is refused until the turn ends,
// and told when that is. Without it, the worker that released takes the
// key back before the woken waiter's attempt arrives, most of the time,
// and the waiter that lost lists itself again; with it, a release hands
// the key over, and a listener that vanished holds it up for one turn.

// markFor is how long a waiter's mark lasts: after the last waiter
// leaves, releases notify for at most that long.
const markFor = 30 * time.Second

// markWatched marks key's row as watched and lists this backend's
// listener among the key's wakers, unless this process did both less
// than half a mark ago and no release has named the listener since. A
// failure leaves the waiter to its safety poll until the next renewal.
func (b *Backend) markWatched(ctx context.Context, key string, renew bool) {
	h := &b.hub
	now := time.Now()
	h.mu.Lock()
	if at, ok := h.marked[key]; ok && !renew && h.listed[key] && now.Sub(at) < markFor/2 {
		h.mu.Unlock()
		return
	}
	namings := h.namings
	h.mu.Unlock()
	s, listed := b.markStmt, ""
	if b.conns == nil {
		// The lease table's mutexes name one listener; the releases of
		// connection-scoped locks wake every waiter.
		listed = h.id + ","
	}
	if _, err := b.db.ExecContext(ctx, s.query, s.args(key, micros(markFor), micros(markFor/2), listed)...); err != nil {
		return
	}
	h.mu.Lock()
	if h.marked == nil {
		h.marked, h.listed = make(map[string]time.Time), make(map[string]bool)
	}
	h.marked[key] = now
	// A release that named the listener meanwhile may have taken it out
	// again: the next attempt lists it once more (see relist).
	h.listed[key] = h.namings == namings
	h.mu.Unlock()
}

// relist lists this backend's listener among key's wakers again after a
// refused attempt, if a waiter of the process watches key and a release
// took the listener out of the wakers (it named it, and the waiter it
// woke lost the race for the lock): otherwise the next release would
// name another process, or none, and this waiter would sleep to its poll.
func (b *Backend) relist(ctx context.Context, key string) {
	if b.markStmt.query == "" || b.listener == nil {
		return
	}
	h := &b.hub
	h.mu.Lock()
	due := len(h.watches[key]) > 0 && !h.listed[key]
	h.mu.Unlock()
	if due {
		b.markWatched(ctx, key, false)
	}
}

// named is the turn of this backend's listener, which a release named
// for key: it wakes the waiter of key that began first. Other waiters of
// key list the listener again; with none, the turn passes to the next
// listener in the key's wakers. h.mu is held.
func (b *Backend) named(key string) {
	h := &b.hub
	h.namings++
	delete(h.listed, key)
	var (
		first *watch
		n     int
	)
	for w := range h.watches[key] {
		n++
		if first == nil || w.seq < first.seq {
			first = w
		}
	}
	if first != nil {
		first.wake()
	}
	if n == 1 || h.isClosed {
		return
	}
	h.chores.Go(func() {
		ctx, cancel := context.WithTimeout(h.ctx, markFor/3)
		defer cancel()
		if n > 1 {
			b.markWatched(ctx, key, true)
			return
		}
		s := b.passOn
		_, _ = b.exec(ctx, s, key)
	})
}

// renewMarks renews, every third of markFor until ctx ends, the marks of
// the keys watched, and forgets those of keys no longer watched.
func (b *Backend) renewMarks(ctx context.Context) {
	h := &b.hub
	tick := time.NewTicker(markFor / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h.mu.Lock()
		keys := make([]string, 0, len(h.watches))
		for key := range h.watches {
			keys = append(keys, key)
		}
		for key := range h.marked {
			if _, ok := h.watches[key]; !ok {
				delete(h.marked, key)
				delete(h.listed, key)
				delete(h.heard, key)
				h.epoch++ // a mark taken before stands for nothing now
			}
		}
		h.mu.Unlock()
		for _, key := range keys {
			b.markWatched(ctx, key, true)
		}
	}
}
