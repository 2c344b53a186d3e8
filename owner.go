package distlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
)

// OwnerID is an owner identity for re-entrant locks: a [Mutex] locked by an
// owner that already holds it is granted again at once, as one more hold of
// the same lease, with the same fencing token. Give the identity with
// [WithOwner] or carry it in the context with [ContextWithOwner]. The hold
// count is kept by the backend; each [Lock.Unlock] releases one hold, and
// the lease ends when the last is released (or when it expires). Every hold
// is a [Lock] of its own, renewed by its own watchdog; any renewal renews
// the lease for all holds, and a hold never shortens the lease another one
// relies on. Holders without the identity are excluded as usual.
//
// Backends state whether they offer re-entrancy (driver.Capabilities); on
// others, locking with an identity fails with an error wrapping
// errors.ErrUnsupported. Re-entrancy is a property of mutexes: an RWMutex
// or Semaphore given WithOwner fails the same way, and one whose context
// carries an identity ignores it.
//
// # Handing a lock to another process
//
// A held lock moves to another process without a gap: the holder sends
// [OwnerID.Secret] to the other process over a channel it trusts; that
// process parses it with [ParseOwnerID] and locks the same key with it,
// which is granted at once as a second hold; then the first process unlocks
// its hold. The lease never lapses in between and the token stays the same.
//
// # Misuse
//
// An OwnerID is a bearer secret: whoever has it enters the lock while it is
// held. It is 128 random bits, so it cannot be guessed; backends receive
// only a digest of it and never show even that ([Client.Inspect] does not);
// and it prints as "OwnerID(redacted)" with fmt and log/slog, so it does not
// end up in logs by accident. Send it only where you would send a password,
// and use a fresh one per piece of work.
type OwnerID struct {
	secret string // 32 hex digits; empty for the zero OwnerID
}

// NewOwnerID returns a fresh owner identity: 128 random bits.
func NewOwnerID() OwnerID { return OwnerID{secret: newOwner()} }

// ParseOwnerID returns the identity whose [OwnerID.Secret] is s. It fails
// with [ErrInvalidArgument] if s is not such a secret.
func ParseOwnerID(s string) (OwnerID, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 || hex.EncodeToString(b) != s {
		return OwnerID{}, fmt.Errorf("%w: not an owner ID (want 32 lower-case hex digits)", ErrInvalidArgument)
	}
	return OwnerID{secret: s}, nil
}

// Secret returns the identity in text, for [ParseOwnerID] in another process.
// Treat it as a password.
func (id OwnerID) Secret() string { return id.secret }

// IsZero reports whether id is the zero OwnerID, which identifies no one.
func (id OwnerID) IsZero() bool { return id.secret == "" }

// String hides the secret: it returns "OwnerID(redacted)", or "OwnerID()"
// for the zero OwnerID.
func (id OwnerID) String() string {
	if id.secret == "" {
		return "OwnerID()"
	}
	return "OwnerID(redacted)"
}

// GoString hides the secret from %#v, as String does from %v.
func (id OwnerID) GoString() string { return id.String() }

// LogValue hides the secret from log/slog, as String does from fmt.
func (id OwnerID) LogValue() slog.Value { return slog.StringValue(id.String()) }

// digest is what backends see of id (driver.Request.Reentry): a one-way
// function of the secret, so that no backend, log or inspection tool can
// hand the secret on.
func (id OwnerID) digest() string {
	sum := sha256.Sum256([]byte("distlock owner\x00" + id.secret))
	return hex.EncodeToString(sum[:16])
}

type ownerKey struct{}

// ContextWithOwner returns a copy of ctx that carries id: [Mutex.Lock] and
// [Mutex.TryLock] called with it lock re-entrantly for id, unless the Mutex
// was given its own identity with [WithOwner]. A zero id makes them fail
// with [ErrInvalidArgument].
func ContextWithOwner(ctx context.Context, id OwnerID) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFromContext returns the identity ctx carries, if any.
func OwnerFromContext(ctx context.Context) (OwnerID, bool) {
	id, ok := ctx.Value(ownerKey{}).(OwnerID)
	return id, ok
}
