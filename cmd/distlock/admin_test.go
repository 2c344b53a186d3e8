//go:build unix

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// list shows the held keys under a prefix, in order, with their holders;
// free keys and keys outside the prefix are left out.
func TestListRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	b, _ := holdLock(t, u, "jobs:b")
	a, _ := holdLock(t, u, "jobs:a")
	holdLock(t, u, "other")
	wantCode(t, runBin(t, "run", "--url", u, "--key", "jobs:freed", "--", "true"), exitOK)

	r := runBin(t, "list", "--url", u, "jobs:")
	wantCode(t, r, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "jobs:a ") || !strings.HasPrefix(lines[2], "jobs:b ") ||
		!strings.Contains(lines[1], "pid="+strconv.Itoa(a.cmd.Process.Pid)) || !strings.Contains(lines[2], "pid="+strconv.Itoa(b.cmd.Process.Pid)) {
		t.Errorf("list jobs: printed\n%s\nwant a header, then jobs:a and jobs:b with their holders' pids", r.stdout)
	}

	r = runBin(t, "list", "--url", u, "--json")
	wantCode(t, r, exitOK)
	var all []keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil {
		t.Fatalf("list --json: %v\n%s", err, r.stdout)
	}
	var keys []string
	for _, s := range all {
		keys = append(keys, s.Key)
		if !s.Held || s.Token == 0 || s.TTLMillis <= 0 {
			t.Errorf("list --json: %+v; want held, with a token and a lease", s)
		}
	}
	if strings.Join(keys, ",") != "jobs:a,jobs:b,other" {
		t.Errorf("list --json keys: %q; want jobs:a, jobs:b, other", keys)
	}

	r = runBin(t, "list", "--url", u, "--json", "nothing-here:")
	wantCode(t, r, exitOK)
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list of an empty prefix --json: %q; want []", r.stdout)
	}
	wantCode(t, runBin(t, "list", "--url", u, "a", "b"), exitUsage)
}

// unlock refuses without --force; with it, it frees the lock, prints the
// holder it removed, and the holder's run stops CMD at its next renewal.
func TestUnlockForceRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holder, _ := holdLock(t, u, "stuck", "--ttl", "3s")

	r := runBin(t, "unlock", "--url", u, "stuck")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "--force") {
		t.Errorf("unlock without --force: stderr %q; want it to name --force", r.stderr)
	}
	// --force is never taken from the environment.
	wantCode(t, runInProcessEnv(t, []string{"DISTLOCK_FORCE=true"}, "unlock", "--url", u, "stuck"), exitUsage)
	wantCode(t, runBin(t, "status", "--url", u, "stuck"), exitOK)

	r = runBin(t, "unlock", "--force", "--url", u, "stuck")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "pid="+strconv.Itoa(holder.cmd.Process.Pid)) {
		t.Errorf("unlock --force printed\n%s\nwant the removed holder's pid %d", r.stdout, holder.cmd.Process.Pid)
	}
	wantCode(t, holder.wait(t, 20*time.Second), exitLeaseLost)

	// The key is free now: another run gets it at once, and unlock says
	// there was nothing to free.
	wantCode(t, runBin(t, "run", "--url", u, "--key", "stuck", "--wait", "0", "--", "true"), exitOK)
	r = runBin(t, "unlock", "--force", "--url", u, "stuck")
	wantCode(t, r, exitFree)
	if !strings.Contains(r.stderr, "not held") {
		t.Errorf("unlock of a free key: stderr %q", r.stderr)
	}
	wantCode(t, runBin(t, "unlock", "--force", "--url", u), exitUsage)
	wantCode(t, runBin(t, "unlock", "--force", "--url", u, ""), exitUsage)
}
