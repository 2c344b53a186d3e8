package main_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, ".", ".")) }

// TestCronJob starts the job as cron would on several hosts: one runs it,
// one started meanwhile skips it, SIGTERM stops the runner and frees the
// lock, the next run gets a higher token, and a run whose lease is lost
// stops its work.
func TestCronJob(t *testing.T) {
	t.Parallel()
	addr, _ := exampletest.StartRedis(t)
	env := []string{"DISTLOCK_URL=redis://" + addr + "/0"}

	first := exampletest.Start(t, env, "cronjob", "-work", "1h")
	var token uint64
	line := first.WaitLine(t, "running the report")
	if _, err := fmt.Sscanf(line, "running the report (fencing token %d)", &token); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}

	stdout, _ := exampletest.Run(t, 0, env, "cronjob", "-work", "0s")
	exampletest.WantLines(t, stdout, "skipped: another host is running the report")

	if err := first.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.Wait(t, 1)
	if _, stderr := first.Output(); !strings.Contains(stderr, "report stopped: terminated") {
		t.Fatalf("stderr after SIGTERM: %q, want the report stopped by the signal", stderr)
	}

	stdout, _ = exampletest.Run(t, 0, env, "cronjob", "-work", "0s")
	exampletest.WantTokenLines(t, stdout, token, "running the report (fencing token %d)", "report done")

	// The lock disappears from the server behind the runner's back (as if
	// it expired during a long pause): the next renewal is refused and the
	// work must stop.
	lost := exampletest.Start(t, env, "cronjob", "-work", "1h", "-ttl", "1s")
	lost.WaitLine(t, "running the report")
	exampletest.FlushAll(t, addr)
	lost.Wait(t, 1)
	if _, stderr := lost.Output(); !strings.Contains(stderr, "report stopped: distlock: lock lost") {
		t.Fatalf("stderr after the lock was removed: %q, want the report stopped by the lost lease", stderr)
	}
}

// TestCronJobNewServer: on a redis-server that has just started, the
// restart guard refuses the lock although no host runs the job; the job
// fails naming the guard, rather than skip as if another host ran it.
func TestCronJobNewServer(t *testing.T) {
	t.Parallel()
	env := []string{"DISTLOCK_URL=redis://" + exampletest.StartNewRedis(t) + "/0"}
	stdout, stderr := exampletest.Run(t, 1, env, "cronjob", "-work", "0s")
	if stdout != "" || !strings.Contains(stderr, "restart guard") {
		t.Fatalf("stdout %q, stderr %q: want no skip, and the restart guard named", stdout, stderr)
	}
}
