package main_test

import (
	"os"
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

// TestReentrantUnsupported: on a backend without re-entrant locks the
// program stops with an error that says so.
func TestReentrantUnsupported(t *testing.T) {
	t.Parallel()
	addr, _ := exampletest.StartRedis(t)
	_, stderr := exampletest.Run(t, 1, nil, "reentrant", "-url", "redis://"+addr+"/0")
	exampletest.WantLines(t, stderr, `reentrant: distlock: re-entrant lock "ledger": unsupported operation by this backend`)
}
