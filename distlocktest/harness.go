// Package distlocktest is the conformance suite that every distlock backend
// passes. A backend's tests call [Run] with a [Harness] that connects to a
// real server:
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t)
//		distlocktest.Run(t, distlocktest.Harness{
//			NewBackend: func(t testing.TB) driver.Backend { return mybackend.New(srv.Dial(t)) },
//			Expire:     func(t testing.TB, key string) { srv.Delete(t, key) },
//		})
//	}
//
// The suite checks the contract of package driver, through the public API
// of package distlock where it can and on the driver directly where it must
// (lost replies, queue order). Every backend is checked for mutual
// exclusion, TryLock, prompt wake-up, cancellation, owner checks, expiry
// and takeover, renewal, fencing tokens, idempotent acquire and release,
// key independence, input validation (through package distlock, and on
// the driver directly: every request the contract rules out) and
// inspection. The checks of each
// capability a backend claims (driver.Capabilities) run too: fair locks
// (order, no queue jumping, giving up, waking one waiter per release),
// read-write locks, semaphores and re-entrant locks.
package distlocktest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Harness connects the suite to the backend under test.
type Harness struct {
	// NewBackend returns a client of the backend under test. Every call
	// should behave like a separate process (its own connection) where the
	// backend allows; all clients share one server. Close what it opens
	// with t.Cleanup. Required.
	NewBackend func(t testing.TB) driver.Backend

	// Expire ends every holding of key behind its holders' backs, as an
	// expiry would: the holders are not told and their next renewal must
	// be refused. Required.
	Expire func(t testing.TB, key string)

	// TTL is the short lease the expiry tests use. It should be a few
	// times the backend's worst round trip. Default 200ms. The checks
	// that renew a lease across several TTLs use at least 1s.
	TTL time.Duration

	// Stored lists what the backend keeps in its store for the keys whose
	// names begin with prefix (Redis keys, table rows, znodes, etcd keys:
	// names of the harness's choosing, one per stored item). The check
	// StateReclaimed locks and releases many keys of every kind the
	// backend claims and requires the list to be empty again within
	// Reclaim: a key nobody holds or waits for leaves nothing behind.
	// Without it, that check is skipped with a message.
	Stored func(t testing.TB, prefix string) []string

	// Reclaim bounds how long after its last release a key's state may
	// stay in the store (a free record that keeps the fencing counter or
	// the release receipt, say). Default 15s.
	Reclaim time.Duration
}

func (h Harness) reclaim() time.Duration {
	if h.Reclaim > 0 {
		return h.Reclaim
	}
	return 15 * time.Second
}

func (h Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return 200 * time.Millisecond
}

// renewalTTL is the lease of the checks that keep a lock across several
// TTLs by renewing it: TTL, but at least two seconds. A renewal falls due
// a third of the way into the lease and must be confirmed before its end;
// on a loaded machine a goroutine or a database server process can wait
// hundreds of milliseconds for a CPU (a 1s lease on an SQLite file was
// seen lost at a load average of 7), while a lock that ends then is doing
// its job.
func (h Harness) renewalTTL() time.Duration { return max(h.ttl(), 2*time.Second) }

// check is one behaviour of the contract.
type check struct {
	name  string
	needs func(driver.Capabilities) bool // the capability it checks; nil: none
	run   func(t testing.TB, h Harness)
}

// Capabilities that checks need.
var (
	fair      = func(c driver.Capabilities) bool { return c.Fair }
	fairWakes = func(c driver.Capabilities) bool { return c.Fair && c.Notify }
	readWrite = func(c driver.Capabilities) bool { return c.ReadWrite }
	semaphore = func(c driver.Capabilities) bool { return c.Semaphore }
	reentrant = func(c driver.Capabilities) bool { return c.Reentrant }
)

// allChecks lists the suite, by lock kind. Each check bounds its own
// waiting, so a broken backend makes it fail, never hang.
func allChecks() []check {
	var all []check
	for _, list := range [][]check{coreChecks, kindChecks, inspectChecks, adminChecks, fairChecks, rwChecks, semaphoreChecks, reentrantChecks} {
		all = append(all, list...)
	}
	return all
}

// Run runs the conformance suite against the backend h describes, each
// check as a subtest, skipping the checks of capabilities the backend does
// not claim.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewBackend == nil || h.Expire == nil {
		t.Fatal("distlocktest: Harness.NewBackend and Harness.Expire are required")
	}
	caps := h.NewBackend(t).Capabilities()
	var skipped []string
	for _, c := range allChecks() {
		if c.needs != nil && !c.needs(caps) {
			skipped = append(skipped, c.name)
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
	if len(skipped) > 0 {
		t.Logf("distlocktest: capabilities %+v; not run: %s", caps, strings.Join(skipped, ", "))
	}
}

// uniqueKey returns a key no other test (or earlier run against a
// persistent server) uses.
func uniqueKey(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return "distlocktest:" + name + ":" + hex.EncodeToString(b[:])
}

// owner returns a fresh owner token, for checks on the driver directly.
func owner(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}
