//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/internal/testserver"
)

// TestRunShellCommand: -c runs a shell command line under the lock, as
// flock -c does, with the lock's variables in its environment.
func TestRunShellCommand(t *testing.T) {
	t.Parallel()
	u, _ := memStore(t)
	r := inProcess(t.Context(), "run", "--url", u, "nightly", "-c", `printf '%s %s|' "$DISTLOCK_KEY" "$DISTLOCK_TOKEN"; exit 3`)
	wantCode(t, r, 3)
	if got, want := r.stdout, "nightly 1|"; got != want {
		t.Errorf("the shell command printed %q, want %q (stderr %q)", got, want, r.stderr)
	}
}

// TestAdminWarnings: list and unlock --force print the deployment's
// warnings under their own names, once; with --json the warnings are in
// the JSON only, not repeated on stderr.
func TestAdminWarnings(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t, testserver.WithArgs("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"))
	u := "redis://" + srv.Addr() + "/0"
	holdLock(t, u, "warned")
	for _, cmd := range [][]string{{"list"}, {"status", "warned"}, {"unlock", "--force", "warned"}} {
		name := cmd[0]
		r := runBin(t, append([]string{name, "--url", u, "--json"}, cmd[1:]...)...)
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%s --json: stderr %q; want the warnings in the JSON only", name, r.stderr)
		}
		if !strings.Contains(r.stdout, "allkeys-lru") {
			t.Errorf("%s --json: %s; want the warning in the JSON", name, r.stdout)
		}
	}
	holdLock(t, u, "warned") // again: unlock --force freed it
	for _, cmd := range [][]string{{"list"}, {"unlock", "--force", "warned"}} {
		name := cmd[0]
		r := runBin(t, append([]string{name, "--url", u}, cmd[1:]...)...)
		want := "distlock " + name + ": warning: "
		if strings.Count(r.stderr, want) != 1 || strings.Contains(r.stderr, "distlock status") || !strings.Contains(r.stderr, "allkeys-lru") {
			t.Errorf("%s: stderr %q; want one warning line starting %q", name, r.stderr, want)
		}
	}
}

// TestRunLongTTLSaysWhatToDo: a --ttl above the Redis backends' maximum
// lease is refused in the CLI's terms: run's renewal makes a long TTL
// needless, and the URL's max_ttl raises the maximum; no Go option, no
// "unsupported operation".
func TestRunLongTTLSaysWhatToDo(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	r := runBin(t, "run", "--url", u, "long", "--ttl", "2h", "--", "true")
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "--ttl 2h0m0s is longer than the longest lease this backend grants (1m0s)")
	wantSays(t, r.stderr, []string{"renews the lease every TTL/3", "max_ttl=2h0m0s"}, []string{"WithMaxTTL", "unsupported operation"})
}

// wantSays fails the test unless stderr says each of says and none of
// not: the library's terms, which a CLI user cannot act on.
func wantSays(t *testing.T, stderr string, says, not []string) {
	t.Helper()
	for _, want := range says {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	for _, n := range not {
		if strings.Contains(stderr, n) {
			t.Errorf("stderr %q says %q", stderr, n)
		}
	}
}

// TestStatusSemaphore: a semaphore's status shows its permits in use and
// its limit, in the table and the JSON, not an unknown holder.
func TestStatusSemaphore(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	for range 2 {
		holdLock(t, u, "pool", "--limit", "3")
	}
	r := runBin(t, "status", "--url", u, "pool")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "permits=2/3") || strings.Contains(r.stdout, "(unknown)") {
		t.Errorf("status of a semaphore with 2 of 3 permits taken:\n%s", r.stdout)
	}
	r = runBin(t, "status", "--url", u, "--json", "pool")
	var got []keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(got) != 1 || got[0].Kind != "permit" || got[0].Holds != 2 || got[0].Limit != 3 {
		t.Errorf("JSON: %s; want kind permit, holds 2, limit 3", r.stdout)
	}
}

// TestDeclareFresh: run refused by a new server's restart guard says how
// to end it; declare-fresh --force ends it, and refuses without --force;
// a backend without a guard has nothing to declare.
func TestDeclareFresh(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t, testserver.AsRestarted())
	u := "redis://" + srv.Addr() + "/0"
	r := runBin(t, "run", "--url", u, "--wait", "0", "fresh", "--", "true")
	wantCode(t, r, exitUnavailable)
	wantOneLine(t, r.stderr, "restart guard")
	if !strings.Contains(r.stderr, "'distlock declare-fresh --force' ends the wait") {
		t.Errorf("stderr %q does not say how to end the guard", r.stderr)
	}
	r = runBin(t, "declare-fresh", "--url", u)
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "add --force")
	r = runBin(t, "declare-fresh", "--force", "--url", u)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "declared fresh") {
		t.Errorf("stdout %q", r.stdout)
	}
	r = runBin(t, "run", "--url", u, "--wait", "0", "fresh", "--", "true")
	wantCode(t, r, exitOK)

	r = runInProcess(t, "declare-fresh", "--force", "--url", "mem://")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "no restart guard") {
		t.Errorf("mem://: stdout %q; want it to say there is no guard", r.stdout)
	}
}
