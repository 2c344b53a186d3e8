package main_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestSemaphore runs two processes against one Redis and one API that
// counts the calls in flight: across both, never more than the limit.
func TestSemaphore(t *testing.T) {
	t.Parallel()
	addr, _ := exampletest.StartRedis(t)
	const limit = 3
	var calls, inFlight, peak atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n > limit {
			http.Error(w, "too many calls at once", http.StatusTooManyRequests)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}))
	defer api.Close()

	var procs []*exampletest.Proc
	for range 2 {
		procs = append(procs, exampletest.Start(t, nil, "semaphore", "-url", "redis://"+addr+"/0", "-api", api.URL, "-limit", "3", "-calls", "8"))
	}
	for _, p := range procs {
		exampletest.WantLines(t, p.Wait(t, 0), "8 calls made, at most 3 at once, none refused")
	}
	if calls.Load() != 16 || peak.Load() > limit {
		t.Fatalf("the API got %d calls, at most %d at once; want 16, at most %d", calls.Load(), peak.Load(), limit)
	}
	t.Logf("at most %d calls were in flight at once", peak.Load())
}

// TestSemaphoreStandIn runs the program alone, on memlock and its own
// stand-in API, and with a limit it must refuse.
func TestSemaphoreStandIn(t *testing.T) {
	t.Parallel()
	stdout, _ := exampletest.Run(t, 0, nil, "semaphore")
	exampletest.WantLines(t, stdout, "12 calls made, at most 3 at once, none refused")
	_, stderr := exampletest.Run(t, 1, nil, "semaphore", "-limit", "0")
	exampletest.WantLines(t, stderr, "semaphore: want -limit 1 or more and -calls 0 or more, got 0 and 12")
}

// TestSemaphoreNewServer: on a redis-server that has just started, the
// restart guard holds the permits back for a minute; the program says so
// while it waits.
func TestSemaphoreNewServer(t *testing.T) {
	t.Parallel()
	p := exampletest.Start(t, nil, "semaphore", "-url", "redis://"+exampletest.StartNewRedis(t)+"/0", "-calls", "1")
	p.WaitStderr(t, "restart guard")
}
