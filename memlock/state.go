package memlock

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// state is all a key has: one set of holds, whatever the kind (a lock and
// its re-entrant holds, the readers, or the permits), the fair waiters in
// line, and a writer's claim on the readers.
type state struct {
	kind    driver.Kind      // of the holds, while there are any
	limit   int              // with Permit: the semaphore's size, while held
	token   uint64           // the newest holding's fencing token
	reentry string           // the identity of an Exclusive lease's holds, or ""
	holds   map[string]*hold // by owner
	queue   []place          // fair waiters, first come first
	claim   place            // a writer waiting for the readers to leave; owner "" if none
	timer   *time.Timer      // runs settleLocked at the next lapse
	wake    bool             // something freed: the waiters are to be woken
}

type hold struct {
	token   uint64
	expires time.Time
	since   time.Time
	meta    map[string]string
}

// place is a waiter's place in line or a writer's claim: it lapses at
// deadline unless the waiter's next attempt renews it.
type place struct {
	owner    string
	deadline time.Time
}

// prune drops the holds, places and claim that lapsed by now, and marks
// the waiters to be woken if that lets any in.
func (s *state) prune(now time.Time) {
	n := len(s.holds)
	maps.DeleteFunc(s.holds, func(_ string, h *hold) bool { return !now.Before(h.expires) })
	if len(s.holds) < n {
		s.wake = true
	}
	if len(s.queue) > 0 {
		head := s.queue[0].owner
		s.queue = slices.DeleteFunc(s.queue, func(p place) bool { return !now.Before(p.deadline) })
		if len(s.queue) == 0 || s.queue[0].owner != head {
			s.wake = true // the next waiter's turn
		}
	}
	if s.claim.owner != "" && !now.Before(s.claim.deadline) {
		s.claim, s.wake = place{}, true
	}
}

// blocked reports whether req must wait, and until when at the latest.
func (s *state) blocked(req driver.Request) (until time.Time, blocked bool) {
	held := len(s.holds) > 0
	switch {
	case held && req.Kind == driver.Exclusive && req.Reentry != "" && s.kind == driver.Exclusive && s.reentry == req.Reentry:
		return time.Time{}, false // one more hold of the same identity
	case held && (s.kind != req.Kind || req.Kind == driver.Exclusive || req.Kind == driver.Write):
		return s.lastExpiry(), true // until every holder has left
	case held && req.Kind == driver.Permit && len(s.holds) >= req.Limit:
		return s.firstExpiry(), true // until one permit is free
	case req.Kind == driver.Read && s.claim.owner != "":
		return s.claim.deadline, true
	case req.Fair && len(s.queue) > 0 && s.queue[0].owner != req.Owner:
		// Free, but another waiter's turn: it takes the lock, or its
		// place lapses (a waiter that vanished) at its deadline.
		return s.queue[0].deadline, true
	}
	return time.Time{}, false
}

// wait keeps the place of a refused request that waits: in line if it is
// fair, or as the writer that holds new readers off.
func (s *state) wait(req driver.Request, now time.Time) {
	if req.Queue <= 0 {
		return
	}
	p := place{owner: req.Owner, deadline: now.Add(req.Queue)}
	switch {
	case req.Fair && req.Kind == driver.Exclusive:
		if i := slices.IndexFunc(s.queue, func(q place) bool { return q.owner == req.Owner }); i >= 0 {
			s.queue[i] = p
		} else {
			s.queue = append(s.queue, p)
		}
	case req.Kind == driver.Write && (s.claim.owner == "" || s.claim.owner == req.Owner):
		s.claim = p
	}
}

// leaveQueue takes owner out of the line. It reports whether that lets the
// next waiter go (owner was first).
func (s *state) leaveQueue(owner string) (wasFirst bool) {
	i := slices.IndexFunc(s.queue, func(q place) bool { return q.owner == owner })
	if i < 0 {
		return false
	}
	s.queue = slices.Delete(s.queue, i, i+1)
	return i == 0
}

// extend renews h to ttl from now. The holds of an Exclusive lease share
// it, so it is renewed for them all, and while it has more than one hold
// it is never shortened: another hold may rely on it.
func (s *state) extend(h *hold, now time.Time, ttl time.Duration) {
	expires := now.Add(ttl)
	if s.kind != driver.Exclusive {
		h.expires = expires
		return
	}
	if last := s.lastExpiry(); len(s.holds) > 1 && last.After(expires) {
		expires = last
	}
	for _, o := range s.holds {
		o.expires = expires
	}
}

func (s *state) firstExpiry() time.Time {
	var t time.Time
	for _, h := range s.holds {
		if t.IsZero() || h.expires.Before(t) {
			t = h.expires
		}
	}
	return t
}

func (s *state) lastExpiry() time.Time {
	var t time.Time
	for _, h := range s.holds {
		if h.expires.After(t) {
			t = h.expires
		}
	}
	return t
}

// nextLapse is when something of s lapses next; zero when s is empty.
func (s *state) nextLapse() time.Time {
	t := s.firstExpiry()
	for _, p := range append(s.queue, s.claim) {
		if p.owner != "" && (t.IsZero() || p.deadline.Before(t)) {
			t = p.deadline
		}
	}
	return t
}

// info describes the holds of s, which has some: the newest holding, or
// the first hold of a re-entrant lease.
func (s *state) info(now time.Time) driver.Info {
	var shown *hold
	for _, h := range s.holds {
		if shown == nil || h.token > shown.token || (h.token == shown.token && h.since.Before(shown.since)) {
			shown = h
		}
	}
	meta := maps.Clone(shown.meta)
	if meta == nil {
		meta = make(map[string]string, 1)
	}
	meta["since"] = strconv.FormatInt(shown.since.UnixMilli(), 10)
	return driver.Info{
		Held:  true,
		Kind:  s.kind,
		Token: shown.token,
		TTL:   s.lastExpiry().Sub(now),
		Holds: len(s.holds),
		Limit: s.limit,
		Meta:  meta,
	}
}

// lastTokens remember the last fencing token of each key that became
// free, for Inspect, until retention passes: a key nobody holds or waits
// for leaves nothing behind for long.
type lastTokens struct {
	token map[string]uint64
	freed map[string]time.Time
	order []freedKey // by time, oldest first; stale entries are skipped
}

type freedKey struct {
	key string
	at  time.Time
}

func (r *lastTokens) add(key string, token uint64, now time.Time) {
	r.drop(now)
	if r.token == nil {
		r.token, r.freed = make(map[string]uint64), make(map[string]time.Time)
	}
	r.token[key], r.freed[key] = token, now
	r.order = append(r.order, freedKey{key, now})
}

// get returns key's last token while it is remembered, else 0.
func (r *lastTokens) get(key string, now time.Time) uint64 {
	r.drop(now)
	return r.token[key]
}

// drop forgets the keys freed longer than retention ago.
func (r *lastTokens) drop(now time.Time) {
	n := 0
	for ; n < len(r.order) && now.Sub(r.order[n].at) >= retention; n++ {
		if f := r.order[n]; r.freed[f.key].Equal(f.at) { // else freed again since
			delete(r.token, f.key)
			delete(r.freed, f.key)
		}
	}
	r.order = r.order[n:]
}

// receipts remember recent releases, so that a repeated Release of the
// same owner (after a lost reply, in a real store) reports success.
type receipts struct {
	at    map[driver.LeaseID]time.Time
	order []driver.LeaseID // order[head:] by age, oldest first
	head  int
}

// Receipts last receiptTTL; at most maxReceipts are kept. A free key's
// last token is remembered for retention.
const (
	receiptTTL  = 10 * time.Second
	maxReceipts = 1 << 16
	retention   = receiptTTL
)

func (r *receipts) add(l driver.LeaseID, now time.Time) {
	r.drop(now)
	if r.at == nil {
		r.at = make(map[driver.LeaseID]time.Time)
	}
	if len(r.at) >= maxReceipts {
		r.forget()
	}
	r.at[l] = now
	r.order = append(r.order, l)
}

func (r *receipts) has(l driver.LeaseID, now time.Time) bool {
	r.drop(now)
	_, ok := r.at[l]
	return ok
}

// drop forgets the receipts older than receiptTTL.
func (r *receipts) drop(now time.Time) {
	for r.head < len(r.order) && now.Sub(r.at[r.order[r.head]]) >= receiptTTL {
		r.forget()
	}
}

// forget drops the oldest receipt.
func (r *receipts) forget() {
	delete(r.at, r.order[r.head])
	r.order[r.head] = driver.LeaseID{}
	r.head++
	if r.head > len(r.order)/2 { // reuse the front of the slice
		r.order = r.order[:copy(r.order, r.order[r.head:])]
		r.head = 0
	}
}
