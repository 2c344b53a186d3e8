package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock-go/distlock/driver"
)

var (
	// ErrNoQuorum is matched (errors.Is) by every [*QuorumError]: too few
	// nodes answered for the operation to decide.
	ErrNoQuorum = errors.New("redlock: no quorum")

	// ErrNodeTimeout is a node's error when it did not answer within the
	// per-node timeout (see [WithNodeTimeout]).
	ErrNodeTimeout = errors.New("redlock: no reply within the node timeout")

	// ErrValidityExpired is returned (wrapped) when a quorum agreed but the
	// time it took, plus the drift allowance, used up the whole lease. The
	// lock was released again on every node.
	ErrValidityExpired = errors.New("redlock: lease expired before the quorum was confirmed")

	// ErrNoNodes is returned by every call of a Backend made from no clients.
	// It wraps driver.ErrInvalidBackend.
	ErrNoNodes = fmt.Errorf("redlock: no nodes (give New one client per independent master; an odd number such as 3 or 5): %w", driver.ErrInvalidBackend)

	// errPending is a node's error when an earlier request of the same owner
	// to that node may still be waiting to run there (its reply was lost).
	// Counting the node could count a grant that the late request undoes.
	errPending = errors.New("not asked: an earlier request of this owner may still be pending here")

	// errTooFew is a node's error when it was not asked because too few
	// nodes could be asked to make a quorum.
	errTooFew = errors.New("not asked: too few nodes without pending requests to make a quorum")

	// errNotWaited is a node's error when the outcome was decided without
	// its reply.
	errNotWaited = errors.New("not waited for: the outcome was already decided")
)

// Outcome is what one node answered.
type Outcome uint8

const (
	// Failed means the node gave no usable answer; NodeResult.Err says why.
	Failed Outcome = iota
	// Succeeded means the node did what was asked: granted, extended,
	// released, confirmed the fencing token or subscribed.
	Succeeded
	// Refused means the node answered no: the lock is held there by another
	// owner (acquire) or not held by this one (refresh, release).
	Refused
	// Skipped means the node was not asked, or its answer not awaited,
	// because the outcome did not depend on it; NodeResult.Err says why.
	Skipped
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Refused:
		return "refused"
	case Skipped:
		return "skipped"
	}
	return "failed"
}

// NodeResult is one node's part in a quorum operation.
type NodeResult struct {
	Addr    string // the node's address, or "node i" when the client does not say
	Outcome Outcome
	Err     error // why the node failed or was skipped
}

// QuorumError reports an operation that missed its quorum because nodes
// failed, with what each node answered. (A quorum missed only because the
// lock is held elsewhere is not an error: Acquire reports it not obtained.)
// A release needs every node's outcome, so its error may name a quorum
// that released the lock and the nodes that did not say.
// It matches [ErrNoQuorum], and unwraps to the nodes' errors, so
// errors.Is(err, context.DeadlineExceeded) and the like work.
type QuorumError struct {
	Op     string // "acquire", "fence", "refresh", "release", "watch" or "inspect"
	Key    string
	Quorum int          // how many nodes had to succeed
	Nodes  []NodeResult // one per node, in the order given to New
}

// Succeeded returns how many nodes succeeded.
func (e *QuorumError) Succeeded() int {
	n := 0
	for _, r := range e.Nodes {
		if r.Outcome == Succeeded {
			n++
		}
	}
	return n
}

var verbs = map[string]string{
	"acquire": "granted the lock",
	"fence":   "confirmed the fencing token",
	"refresh": "extended the lease",
	"release": "released the lock",
	"watch":   "subscribed",
	"inspect": "answered",
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("redlock: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(strconv.Quote(e.Key))
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(e.Succeeded()))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(len(e.Nodes)))
	b.WriteString(" nodes ")
	if v, ok := verbs[e.Op]; ok {
		b.WriteString(v)
	} else {
		b.WriteString("succeeded")
	}
	if e.Op == "release" && e.Succeeded() >= e.Quorum {
		// A release waits for every node: see Backend.Release.
		b.WriteString(", but some may still hold it")
	} else {
		b.WriteString(", ")
		b.WriteString(strconv.Itoa(e.Quorum))
		b.WriteString(" needed")
	}
	sep := ": "
	for _, r := range e.Nodes {
		if r.Outcome == Succeeded {
			continue
		}
		b.WriteString(sep)
		sep = "; "
		b.WriteString(r.Addr)
		if r.Outcome == Refused {
			if e.Op == "acquire" {
				b.WriteString(" held by another owner")
			} else {
				b.WriteString(" not held by this owner")
			}
			continue
		}
		b.WriteString(": ")
		if r.Outcome == Skipped {
			b.WriteString("skipped, ")
		}
		if r.Err != nil {
			b.WriteString(r.Err.Error())
		} else {
			b.WriteString("failed")
		}
	}
	return b.String()
}

// Unwrap returns the failed nodes' errors.
func (e *QuorumError) Unwrap() []error {
	var errs []error
	for _, r := range e.Nodes {
		if r.Outcome == Failed && r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return errs
}

// Is reports whether target is [ErrNoQuorum].
func (e *QuorumError) Is(target error) bool { return target == ErrNoQuorum }

// quorumError describes rs, the replies of an operation that missed its
// quorum.
func (b *Backend) quorumError(op, key string, rs []reply) *QuorumError {
	e := &QuorumError{Op: op, Key: key, Quorum: b.quorum, Nodes: make([]NodeResult, len(rs))}
	for i, r := range rs {
		nr := NodeResult{Addr: b.nodes[i].addr, Err: r.err}
		if r.err == errPending {
			if last := b.nodes[i].lastErr.Load(); last != nil {
				nr.Err = fmt.Errorf("%w; its last error: %w", errPending, *last)
			}
		}
		switch {
		case r.err == errPending || r.err == errTooFew || r.err == errNotWaited || r.err == errNotGranting:
			nr.Outcome = Skipped
		case r.err != nil:
			nr.Outcome = Failed
		case r.ok:
			nr.Outcome = Succeeded
		default:
			nr.Outcome = Refused
		}
		e.Nodes[i] = nr
	}
	if op == "watch" {
		e.Quorum = 1
	}
	return e
}
