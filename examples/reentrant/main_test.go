package main_test

import (
	"os"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestReentrant: the nested lock and the worker share the job's lease and
// token, and the lock is free once the last hold is released.
func TestReentrant(t *testing.T) {
	t.Parallel()
	stdout, _ := exampletest.Run(t, 0, nil, "reentrant")
	exampletest.WantLines(t, stdout,
		"closing the day: held true, 2 holds, token 1",
		"worker entered: held true, 2 holds, token 1",
		"job left: held true, 1 holds, token 1",
		"worker left: held false, 0 holds, token 1")
}

// TestReentrantRedis: the same on Redis, whose tokens follow the server
// clock: every line carries the one token of the lease.
func TestReentrantRedis(t *testing.T) {
	t.Parallel()
	addr, _ := exampletest.StartRedis(t)
	stdout, _ := exampletest.Run(t, 0, nil, "reentrant", "-url", "redis://"+addr+"/0")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("output:\n%s\nwant 4 lines", stdout)
	}
	token := lines[0][strings.LastIndex(lines[0], " ")+1:]
	exampletest.WantLines(t, stdout,
		"closing the day: held true, 2 holds, token "+token,
		"worker entered: held true, 2 holds, token "+token,
		"job left: held true, 1 holds, token "+token,
		"worker left: held false, 0 holds, token "+token)
}

// TestReentrantNewServer: on a redis-server that has just started, the
// restart guard holds the ledger's lock back for a minute; the program
// says so while it waits.
func TestReentrantNewServer(t *testing.T) {
	t.Parallel()
	p := exampletest.Start(t, nil, "reentrant", "-url", "redis://"+exampletest.StartNewRedis(t)+"/0")
	p.WaitStderr(t, "restart guard")
}
