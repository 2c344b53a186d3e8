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

// markFor is how long a waiter's mark lasts: after the last waiter
// leaves, releases notify for at most that long.
const markFor = 30 * time.Second

// markWatched marks key's row as watched, unless this process marked it
// less than half a mark ago. A failure leaves the waiter to its safety
// poll until the next renewal.
func (b *Backend) markWatched(ctx context.Context, key string, renew bool) {
	h := &b.hub
	now := time.Now()
	h.mu.Lock()
	if at, ok := h.marked[key]; ok && !renew && now.Sub(at) < markFor/2 {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	s := b.markStmt
	if _, err := b.db.ExecContext(ctx, s.query, s.args(key, micros(markFor), micros(markFor/2))...); err != nil {
		return
	}
	h.mu.Lock()
	if h.marked == nil {
		h.marked = make(map[string]time.Time)
	}
	h.marked[key] = now
	h.mu.Unlock()
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
			}
		}
		h.mu.Unlock()
		for _, key := range keys {
			b.markWatched(ctx, key, true)
		}
	}
}
