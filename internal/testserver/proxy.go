package testserver

import (
	"testing"

	"github.com/distlock-go/distlock/internal/launch"
)

// Proxy is a TCP proxy on a free port of 127.0.0.1 that forwards every
// connection to a target address and can inject network faults (see
// package launch).
type Proxy = launch.Proxy

// StartProxy starts a proxy in front of target (host:port), closed when the
// test finishes; all its goroutines have exited by the time that cleanup
// returns. The target is dialed once per accepted connection, so it need
// not be up yet.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := launch.StartProxy(target)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}
