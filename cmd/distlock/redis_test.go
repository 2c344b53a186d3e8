//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
	"github.com/distlock-go/distlock/internal/testserver"
)

// startRedis starts a redis-server for one test and returns its URL.
func startRedis(t *testing.T) (*testserver.Redis, string) {
	t.Helper()
	srv := testserver.StartRedis(t)
	return srv, "redis://" + srv.Addr() + "/0"
}

// Several processes running under one key never overlap, and with
// --wait forever every one of them gets its turn.
func TestRunMutualExclusion(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	log := filepath.Join(t.TempDir(), "log")
	const n = 6
	procs := make([]*process, n)
	for i := range procs {
		procs[i] = startBin(t, append([]string{"run", "--url", u, "--key", "shared", "--wait", "forever", "--"},
			child("record", log, "50ms")...)...)
	}
	for _, p := range procs {
		wantCode(t, p.wait(t, 60*time.Second), 0)
	}
	checkNoOverlap(t, log, n)
}

// checkNoOverlap checks that log holds n enter/leave pairs that never
// interleave, with fencing tokens that increase from one holder to the next.
func checkNoOverlap(t *testing.T, log string, n int) {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*n, data)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		enter, leave := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(enter) != 3 || len(leave) != 3 || enter[0] != "enter" || leave[0] != "leave" || enter[2] != leave[2] {
			t.Fatalf("holders overlap at line %d:\n%s", i+1, data)
		}
		token, err := strconv.ParseUint(enter[1], 10, 64)
		if err != nil || enter[1] != leave[1] {
			t.Fatalf("bad token at line %d:\n%s", i+1, data)
		}
		if token <= last {
			t.Fatalf("token %d after %d at line %d:\n%s", token, last, i+1, data)
		}
		last = token
	}
}

// holdLock starts a distlock run that holds key until it is signalled, and
// returns it once CMD runs.
func holdLock(t *testing.T, u, key string, extra ...string) (p *process, signals string) {
	t.Helper()
	dir := t.TempDir()
	ready, signals := filepath.Join(dir, "ready"), filepath.Join(dir, "signals")
	args := append([]string{"run", "--url", u, "--key", key}, extra...)
	p = startBin(t, append(append(args, "--"), child("hold", ready, signals)...)...)
	select {
	case <-p.done:
		t.Fatalf("holder exited with %d: %s", p.res.code, p.res.stderr)
	default:
	}
	waitFile(t, ready, 30*time.Second)
	return p, signals
}

func TestRunNoWaitRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holder, signals := holdLock(t, u, "busy")

	marker := filepath.Join(t.TempDir(), "ran")
	r := runBin(t, append([]string{"run", "--url", u, "--key", "busy", "--wait", "0", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitNotObtained)
	wantOneLine(t, r.stderr, `lock "busy" is held elsewhere`)
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran although the lock was held")
	}
	// "At once": no waiting for the holder's lease (30s) or anything like it.
	if r.took > 10*time.Second {
		t.Errorf("--wait 0 took %v", r.took)
	}

	// SIGTERM to distlock reaches CMD, and CMD's status comes back.
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantCode(t, holder.wait(t, 30*time.Second), 128+int(syscall.SIGTERM))
	if got, _ := os.ReadFile(signals); string(got) != "SIGTERM\n" {
		t.Errorf("CMD received %q, want SIGTERM", got)
	}

	// Released: a single attempt now succeeds.
	r = runBin(t, append([]string{"run", "--url", u, "--key", "busy", "--wait", "0", "--"}, child("exit", "0")...)...)
	wantCode(t, r, 0)
}

func TestRunForwardsSIGINT(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holder, signals := holdLock(t, u, "k")
	if err := holder.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	wantCode(t, holder.wait(t, 30*time.Second), 128+int(syscall.SIGINT))
	if got, _ := os.ReadFile(signals); string(got) != "SIGINT\n" {
		t.Errorf("CMD received %q, want SIGINT", got)
	}
}

// A signal while waiting ends the wait with 128+n, and CMD never runs.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holdLock(t, u, "k")
	marker := filepath.Join(t.TempDir(), "ran")
	waiter := startBin(t, append([]string{"run", "--url", u, "--key", "k", "--"}, child("record", marker, "0s")...)...)
	time.Sleep(time.Second) // let it start waiting; a signal before that is handled alike
	if err := waiter.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := waiter.wait(t, 30*time.Second)
	if r.code == -1 { // a second is ample to install the handler: this is a bug
		t.Fatalf("distlock died of the SIGTERM instead of ending its wait with 128+15")
	}
	wantCode(t, r, 128+int(syscall.SIGTERM))
	wantOneLine(t, r.stderr, "interrupted by SIGTERM")
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran")
	}
}

// The lease runs out while the server hangs: CMD is stopped and run exits
// with exitLeaseLost.
func TestRunLeaseLostRedis(t *testing.T) {
	t.Parallel()
	srv, u := startRedis(t)
	holder, signals := holdLock(t, u, "k", "--ttl", "1s", "--grace", "2s")
	srv.Pause(t)
	time.Sleep(3 * time.Second)
	srv.Resume(t)
	r := holder.wait(t, 30*time.Second)
	wantCode(t, r, exitLeaseLost)
	for _, want := range []string{`lost the lock on "k"`, "exiting with 79"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if got, _ := os.ReadFile(signals); string(got) != "SIGTERM\n" {
		t.Errorf("CMD received %q, want SIGTERM", got)
	}
}

func TestRunBackendUnavailable(t *testing.T) {
	t.Parallel()
	port, err := launch.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	// The client retries a refused connection for a few seconds: run the
	// cases side by side.
	for _, wait := range []string{"0", "forever"} {
		t.Run("run --wait "+wait, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, append([]string{"run", "--url", u, "--key", "k", "--wait", wait, "--"}, child("exit", "0")...)...)
			wantCode(t, r, exitUnavailable)
			wantOneLine(t, r.stderr, "backend unavailable")
		})
	}
	t.Run("status", func(t *testing.T) {
		t.Parallel()
		r := runBin(t, "status", "--url", u, "k")
		wantCode(t, r, exitUnavailable)
		wantOneLine(t, r.stderr, "connection refused")
	})
}

// A backend that fails the first attempts, as a cold connection may, is
// tried again rather than reported unavailable, even with --wait 0.
func TestRunFirstContactRetried(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	proxy := testserver.StartProxy(t, srv.Addr())
	proxy.Cut()
	p := startBin(t, append([]string{"run", "--url", "redis://" + proxy.Addr() + "/0", "--key", "k", "--wait", "0", "--"}, child("exit", "0")...)...)
	time.Sleep(time.Second)
	proxy.Restore()
	r := p.wait(t, 30*time.Second)
	wantCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holder, _ := holdLock(t, u, "held key", "--ttl", "20s")

	r := runBin(t, "status", "--url", u, "held key", "free-key", "--json")
	wantCode(t, r, exitFree) // one key is free
	var got []keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("status --json printed invalid JSON: %v\n%s", err, r.stdout)
	}
	if len(got) != 2 {
		t.Fatalf("%d entries, want 2:\n%s", len(got), r.stdout)
	}
	held, free := got[0], got[1]
	host, _ := os.Hostname()
	switch {
	case held.Key != "held key" || !held.Held || held.Token == 0:
		t.Errorf("held key: %+v", held)
	case held.TTLMillis <= 0 || held.TTLMillis > 20000:
		t.Errorf("held key: TTL %dms, want within (0, 20s]", held.TTLMillis)
	case held.Meta["pid"] != strconv.Itoa(holder.cmd.Process.Pid):
		t.Errorf("held key: pid %q, want the holder's %d", held.Meta["pid"], holder.cmd.Process.Pid)
	case held.Meta["host"] != host:
		t.Errorf("held key: host %q, want %q", held.Meta["host"], host)
	case held.Meta["cmd"] != filepath.Base(testExe):
		t.Errorf("held key: cmd %q, want %q", held.Meta["cmd"], filepath.Base(testExe))
	case held.Since == "":
		t.Errorf("held key: no since in %v", held.Meta)
	}
	if since, err := time.Parse(time.RFC3339Nano, held.Since); err == nil {
		if d := time.Since(since); d < -time.Minute || d > 5*time.Minute {
			t.Errorf("held key: since %v is not about now", since)
		}
	}
	if free.Key != "free-key" || free.Held || free.TTLMillis != 0 {
		t.Errorf("free key: %+v", free)
	}

	r = runBin(t, "status", "--url", u, "held key", "free-key")
	wantCode(t, r, exitFree)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY") ||
		!strings.HasPrefix(lines[1], `"held key"`) || !strings.Contains(lines[1], " held ") ||
		!strings.Contains(lines[1], "pid="+strconv.Itoa(holder.cmd.Process.Pid)) ||
		!strings.HasPrefix(lines[2], "free-key") || !strings.Contains(lines[2], " free ") {
		t.Errorf("status table:\n%s", r.stdout)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	testserver.Require(t, "redis-server")
	r := runBin(t, "demo", "--rounds", "3", "--pause", "100ms")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "With distlock: 0 of 3.") {
		t.Errorf("the rule broke with the lock:\n%s", r.stdout)
	}
	// The race is real, so in principle a round could go right by chance;
	// all three practically never do.
	if strings.Contains(r.stdout, "without a lock: 0 of 3.") {
		t.Errorf("no violation without the lock:\n%s", r.stdout)
	}
	if strings.Count(r.stdout, "RULE BROKEN") == 0 {
		t.Errorf("no round shows a broken rule:\n%s", r.stdout)
	}
}

func TestDemoWithURL(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	r := runBin(t, "demo", "--url", u, "--rounds", "2", "--doctors", "3", "--pause", "50ms")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "With distlock: 0 of 2.") || !strings.Contains(r.stdout, u) {
		t.Errorf("demo output:\n%s", r.stdout)
	}
}

// TestDemoNewServer: against a server whose restart guard holds new locks
// back, the demo says so at once in the CLI's terms (what it is, when it
// ends, the command that ends it), not as an unavailable backend with the
// library's API.
func TestDemoNewServer(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t, testserver.AsRestarted())
	r := runBin(t, "demo", "--url", "redis://"+srv.Addr()+"/0", "--rounds", "1")
	wantCode(t, r, exitUnavailable)
	wantOneLine(t, r.stderr, "restart guard: the server started less than")
	wantSays(t, r.stderr, []string{"new locks are granted in", "distlock declare-fresh --force"}, []string{"backend unavailable", "Client.DeclareFresh"})
}

func TestDemoWithoutRedisServer(t *testing.T) {
	t.Parallel()
	p := startBinEnv(t, []string{"PATH=" + t.TempDir()}, "demo")
	r := p.wait(t, 30*time.Second)
	wantCode(t, r, exitUnavailable)
	wantOneLine(t, r.stderr, "scripts/install-deps.sh")
}

// The same guarantees over Redlock: three independent servers.
func TestRunRedlock(t *testing.T) {
	t.Parallel()
	var addrs []string
	for range 3 {
		addrs = append(addrs, testserver.StartRedis(t).Addr())
	}
	u := "redlock://" + strings.Join(addrs, ",")
	log := filepath.Join(t.TempDir(), "log")
	const n = 4
	procs := make([]*process, n)
	for i := range procs {
		procs[i] = startBin(t, append([]string{"run", "--url", u, "--key", "shared", "--"}, child("record", log, "30ms")...)...)
	}
	for _, p := range procs {
		wantCode(t, p.wait(t, 60*time.Second), 0)
	}
	checkNoOverlap(t, log, n)

	holder, _ := holdLock(t, u, "held")
	r := runBin(t, "status", "--url", u, "--json", "held")
	wantCode(t, r, 0)
	var got []keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 || !got[0].Held {
		t.Fatalf("status: %v\n%s", err, r.stdout)
	}
	if pid := got[0].Meta["pid"]; pid != "" && pid != strconv.Itoa(holder.cmd.Process.Pid) {
		t.Errorf("status: pid %q, want the holder's %d", pid, holder.cmd.Process.Pid)
	}

	r = runBin(t, "demo", "--url", u, "--rounds", "2", "--pause", "50ms")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "With distlock: 0 of 2.") {
		t.Errorf("demo over Redlock:\n%s", r.stdout)
	}
}

// startRedisWithPassword starts a redis-server that requires password.
func startRedisWithPassword(t *testing.T, password string) *testserver.Redis {
	t.Helper()
	srv := testserver.StartRedis(t)
	// Set after the start: the start checks the server with a bare PING.
	if _, err := srv.Do(t, "CONFIG", "SET", "requirepass", password); err != nil {
		t.Fatal(err)
	}
	return srv
}

// CMD gets the key and the token, but not the backend URL with its
// password, nor any other DISTLOCK_ variable of run's environment.
func TestRunChildEnvironmentHasNoCredentials(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pw"
	srv := startRedisWithPassword(t, password)
	u := "redis://:" + password + "@" + srv.Addr() + "/0"
	p := startBinEnv(t, []string{urlEnv + "=" + u, "DISTLOCK_AUTH_FILE=/run/secrets/x"},
		append([]string{"run", "--key", "jobs/env", "--"}, child("environ")...)...)
	r := p.wait(t, 60*time.Second)
	wantCode(t, r, 0)
	env := strings.Split(r.stdout, "\n")
	if !slices.Contains(env, "DISTLOCK_KEY=jobs/env") {
		t.Errorf("CMD's environment lacks DISTLOCK_KEY=jobs/env")
	}
	if !slices.ContainsFunc(env, func(kv string) bool {
		n, err := strconv.ParseUint(strings.TrimPrefix(kv, "DISTLOCK_TOKEN="), 10, 64)
		return strings.HasPrefix(kv, "DISTLOCK_TOKEN=") && err == nil && n > 0
	}) {
		t.Errorf("CMD's environment lacks DISTLOCK_TOKEN=<the token>")
	}
	for _, kv := range env {
		if strings.Contains(kv, password) || (strings.HasPrefix(kv, "DISTLOCK_") &&
			!strings.HasPrefix(kv, keyEnv+"=") && !strings.HasPrefix(kv, tokenEnv+"=")) {
			t.Errorf("CMD's environment has %s", kv)
		}
	}
}

// TestRunRestartGuardRedis: on a server that has just started and was not
// declared fresh, the restart guard holds new locks back. A free key is
// then not "held elsewhere": run says that the guard is the cause, with
// --wait 0 as a failure of the backend (69), not a conflict, and before it
// waits.
func TestRunRestartGuardRedis(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t, testserver.AsRestarted())
	u := "redis://" + srv.Addr() + "/0"
	marker := filepath.Join(t.TempDir(), "ran")
	r := runBin(t, append([]string{"run", "--url", u, "--key", "fresh", "--wait", "0", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitUnavailable)
	if !strings.Contains(r.stderr, `lock "fresh" not obtained: it is free, but restart guard:`) {
		t.Errorf("stderr %q; want it to name the restart guard", r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran although the guard held the lock back")
	}
	r = runBin(t, append([]string{"run", "--url", u, "--key", "fresh", "--wait", "1s", "--"}, child("exit", "0")...)...)
	if !strings.Contains(r.stderr, `waiting for "fresh": it is free, but restart guard:`) {
		t.Errorf("stderr %q; want a note on the restart guard before the wait", r.stderr)
	}
	// When the wait ends under the guard, the failure is the guard's too:
	// not "held elsewhere", and not the conflict's status.
	wantCode(t, r, exitUnavailable)
	if !strings.Contains(r.stderr, `lock "fresh" not obtained within 1s: it is free, but restart guard:`) || strings.Contains(r.stderr, "held elsewhere") {
		t.Errorf("stderr %q; want the wait's end to name the restart guard, not a holder", r.stderr)
	}
}

// TestRunTTLAboveMaximumRedis: a TTL above the restart guard's maximum
// lease length can never be granted; run says so at once, as a usage
// error, rather than retrying and calling the backend unavailable.
func TestRunTTLAboveMaximumRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	r := runBin(t, "run", "--url", u, "--key", "long", "--ttl", "2m", "--", "true")
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "max_ttl")
	if r.took > 3*time.Second {
		t.Errorf("run took %v to refuse a TTL no retry can make valid", r.took)
	}
}
