package main

import (
	"os/exec"
	"testing"
	"time"
)

// An orphan that CMD leaves behind is re-parented to run, which reaps it
// when it exits, while CMD's own status is still passed on. childMain's
// orphan mode exits 7 once its orphan is reaped and 3 if it stays a zombie.
func TestRunReapsOrphans(t *testing.T) {
	t.Parallel()
	runArgs := append([]string{"run", "--url", fileURL(t), "--key", "k", "--"}, child("orphan")...)

	t.Run("subreaper", func(t *testing.T) {
		t.Parallel()
		// The harness is a subreaper that never reaps: an orphan that
		// run does not adopt ends up there as a zombie.
		p := startProg(t, testExe, nil, append([]string{childArg, "subreaper", binary}, runArgs...)...)
		wantCode(t, p.wait(t, 60*time.Second), 7)
	})

	t.Run("pid 1", func(t *testing.T) {
		t.Parallel()
		unshare := requireTool(t, "unshare", "util-linux")
		if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
			t.Skipf("cannot make a PID namespace (needs root): %v %s", err, out)
		}
		// In a PID namespace of its own run is PID 1, as in a container.
		p := startProg(t, unshare, nil, append([]string{"--pid", "--fork", "--mount-proc", binary}, runArgs...)...)
		wantCode(t, p.wait(t, 60*time.Second), 7)
	})
}
