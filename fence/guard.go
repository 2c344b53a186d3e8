package fence

import "sync"

// Guard is an in-process fence for resources owned by one process. It
// remembers, per resource name, the highest token it has accepted.
//
// A Guard keeps one small entry per resource name it has seen, for its
// whole life, and never forgets one: forgetting would let a stale holder in
// again. Use names from a bounded set (one per lockable object), or a Guard
// per unit of data that is itself dropped with that data.
//
// The zero value is ready to use. A Guard is safe for concurrent use and
// must not be copied after first use.
type Guard struct {
	mu sync.Mutex
	m  map[string]*guardEntry
}

type guardEntry struct {
	mu      sync.Mutex // held across the check, the record and the write
	highest uint64
	holder  string // of the highest token, if its writers named one
	seen    bool
}

func (g *Guard) entry(resource string) *guardEntry {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.m[resource]
	if e == nil {
		if g.m == nil {
			g.m = make(map[string]*guardEntry)
		}
		e = new(guardEntry)
		g.m[resource] = e
	}
	return e
}

// Admit accepts token for resource if it is not lower than the highest
// token accepted for resource so far, and records it as the new highest.
// An equal token is accepted: it is the same holding writing again (see
// [Guard.AdmitHolder] for stores that may repeat a token). A lower
// token is rejected with an error wrapping [ErrStale] that names both
// tokens.
//
// Admit only orders the admissions. If the write happens after Admit
// returns, a writer admitted with a lower token can still be overtaken by
// one with a higher token and then overwrite it. Use [Guard.Do] unless
// writes to resource are already serialized, for instance by running in
// one goroutine.
func (g *Guard) Admit(resource string, token uint64) error {
	return g.Do(resource, token, nil)
}

// Do is [Guard.Admit] with the write: if token is admitted for resource,
// Do calls write and returns its error; otherwise it returns an error
// wrapping [ErrStale] without calling write. No other Do or Admit for the
// same resource runs between the check and the end of write, so the check
// still holds when the write happens. Calls for different resources do not
// wait for each other.
//
// The token stays recorded even if write fails: a failed write does not
// make older holders current again. write must not call Do or Admit for
// the same resource on g. A nil write makes Do equivalent to Admit.
func (g *Guard) Do(resource string, token uint64, write func() error) error {
	return g.DoHolder(resource, token, "", write)
}

// AdmitHolder is [Guard.Admit] for a writer that names its holding:
// holder is the lock's [Lock.Holder], or any identifier fixed for one
// holding. It also rejects token when it equals the highest accepted token
// but came with another holder, with an error wrapping [ErrTokenReused]
// and [ErrStale]. An empty holder names nobody: it matches any.
//
// [Lock.Holder]: https://pkg.go.dev/github.com/distlock-go/distlock#Lock.Holder
func (g *Guard) AdmitHolder(resource string, token uint64, holder string) error {
	return g.DoHolder(resource, token, holder, nil)
}

// DoHolder is [Guard.Do] with the check of [Guard.AdmitHolder]: a write
// with the highest token so far is let through only for the holder that
// first wrote with it (or when either side names no holder).
func (g *Guard) DoHolder(resource string, token uint64, holder string, write func() error) error {
	e := g.entry(resource)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.seen && token < e.highest:
		return NewStaleError(token, e.highest)
	case e.seen && token == e.highest:
		if holder != "" && e.holder != "" && holder != e.holder {
			return NewTokenReusedError(token, e.holder, holder)
		}
		if e.holder == "" {
			e.holder = holder
		}
	default:
		e.highest, e.holder, e.seen = token, holder, true
	}
	if write == nil {
		return nil
	}
	return write()
}

// Highest returns the highest token accepted for resource, and false if
// none has been accepted yet. It waits for a Do in progress on resource.
func (g *Guard) Highest(resource string) (token uint64, ok bool) {
	g.mu.Lock()
	e := g.m[resource]
	g.mu.Unlock()
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.highest, e.seen
}
