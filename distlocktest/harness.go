// Package distlocktest is the conformance suite that every distlock backend
// passes. A backend's tests call [Run] with a [Harness] that connects to a
// real server:
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t)
//		distlocktest.Run(t, distlocktest.Harness{
//			NewBackend: func(t distlocktest.TB) driver.Backend { return mybackend.New(srv.Dial(t)) },
//			Expire:     func(t distlocktest.TB, key string) { srv.Delete(t, key) },
//		})
//	}
//
// The suite checks the contract of package driver through the public API of
// package distlock: mutual exclusion, TryLock, prompt wake-up, cancellation,
// owner checks, expiry and takeover, renewal, fencing tokens, key
// independence and input validation. Capabilities a backend claims
// (driver.Capabilities) are tested too.
package distlocktest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// TB is the part of testing.TB the suite uses; *testing.T satisfies it.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

// Harness connects the suite to the backend under test.
type Harness struct {
	// NewBackend returns a client of the backend under test. Every call
	// should behave like a separate process (its own connection) where the
	// backend allows; all clients share one server. Close clients with
	// t.Cleanup. Required.
	NewBackend func(t TB) driver.Backend

	// Expire removes the lock on key behind its holder's back, as an
	// expiry would: the holder is not told and its next renewal must be
	// refused. Required.
	Expire func(t TB, key string)

	// TTL is the short lease the expiry tests use. It should be a few
	// times the backend's worst round trip. Default 200ms.
	TTL time.Duration
}

func (h Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return 200 * time.Millisecond
}

// uniqueKey returns a key no other test (or earlier run against a
// persistent server) uses.
func uniqueKey(t TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return "distlocktest:" + name + ":" + hex.EncodeToString(b[:])
}
