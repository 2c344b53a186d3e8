package main_test

import (
	"os"
	"testing"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestLeaderAlone leads on memlock until -for ends, then resigns.
func TestLeaderAlone(t *testing.T) {
	t.Parallel()
	stdout, _ := exampletest.Run(t, 0, nil, "leader", "-id", "a", "-for", "200ms")
	exampletest.WantLines(t, stdout, "a leads with token 1", "a resigned")
}

// TestLeaderTakeover runs two processes against one Redis: b waits while a
// leads, and leads as soon as a resigns.
func TestLeaderTakeover(t *testing.T) {
	t.Parallel()
	addr, _ := exampletest.StartRedis(t)
	url := "redis://" + addr + "/0"
	a := exampletest.Start(t, nil, "leader", "-url", url, "-id", "a", "-for", "2s")
	a.WaitLine(t, "a leads")
	b := exampletest.Start(t, nil, "leader", "-url", url, "-id", "b", "-for", "30s")
	first := exampletest.WantTokenLines(t, a.Wait(t, 0), 0, "a leads with token %d", "a resigned")
	// b leads once a has resigned, with a higher token.
	b.WaitLine(t, "b leads with token")
	_ = b.Cmd.Process.Signal(os.Interrupt)
	exampletest.WantTokenLines(t, b.Wait(t, 0), first, "b leads with token %d", "b resigned")
}

// TestLeaderNewServer: on a redis-server that has just started, the
// restart guard holds the first term back for a minute; the program says
// so while it campaigns.
func TestLeaderNewServer(t *testing.T) {
	t.Parallel()
	p := exampletest.Start(t, nil, "leader", "-url", "redis://"+exampletest.StartNewRedis(t)+"/0", "-id", "a", "-for", "1m")
	p.WaitStderr(t, "restart guard")
}
