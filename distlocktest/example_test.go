package distlocktest_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

// harness connects the suite to the backend under test; memlock stands in
// for a third party's backend here. A backend on a server starts the
// server once per test (on a free loopback port, its files in t.TempDir),
// dials it in NewBackend (a new client per call, as if from another
// process, closed with t.Cleanup) and in Expire deletes the lock on the
// server behind its holder's back.
func harness() distlocktest.Harness {
	store := memlock.New()
	return distlocktest.Harness{
		NewBackend: func(testing.TB) driver.Backend { return store },
		Expire:     func(_ testing.TB, key string) { store.Expire(key) },
		TTL:        100 * time.Millisecond, // a few times the worst round trip
	}
}

// ExampleRun is what a backend adds to its tests, as conformance_test.go.
// Run needs the *testing.T of a test, which an Example does not get: in the
// backend's package the body below is
//
//	func TestConformance(t *testing.T) {
//		distlocktest.Run(t, harness())
//	}
//
// and go test runs each check of the suite, and each capability the
// backend claims, as a subtest of TestConformance.
func ExampleRun() {
	var t *testing.T // TestConformance's
	distlocktest.Run(t, harness())
}
