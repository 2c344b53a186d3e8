//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

// The exit status of CMD is run's exit status, whatever it is.
func TestRunPassesExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  []string
		want int
	}{
		{"success", child("exit", "0"), 0},
		{"failure", child("exit", "3"), 3},
		{"a code distlock also uses", child("exit", "75"), 75},
		{"killed by a signal", child("kill-self"), 128 + 9},
		{"not found", []string{"distlock-no-such-command"}, exitNotFound},
		{"not executable", []string{"/dev/null"}, exitCannotExec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, append([]string{"run", "--url", fileURL(t), "--key", "k", "--"}, tt.cmd...)...)
			wantCode(t, r, tt.want)
		})
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	r := runBin(t, append([]string{"run", "--url", fileURL(t), "--key", "jobs/nightly", "--"}, child("env")...)...)
	wantCode(t, r, 0)
	// A new lock table: the first token is 1.
	if got, want := r.stdout, "jobs/nightly 1\n"; got != want {
		t.Errorf("CMD saw DISTLOCK_KEY DISTLOCK_TOKEN = %q, want %q", got, want)
	}
}

func TestRunURLFromEnvironment(t *testing.T) {
	t.Parallel()
	var stdout, stderr lockedBuffer
	env := map[string]string{urlEnv: "mem://"}
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	if code := c.main(t.Context(), append([]string{"run", "--key", "k", "--"}, child("exit", "0")...)); code != 0 {
		t.Fatalf("with %s set: status %d, stderr %s", urlEnv, code, stderr.String())
	}
	env[urlEnv] = "nope://"
	if code := c.main(t.Context(), append([]string{"run", "--url", "mem://", "--key", "k", "--"}, child("exit", "0")...)); code != 0 {
		t.Fatalf("--url should win over %s: status %d, stderr %s", urlEnv, code, stderr.String())
	}
}

// fileURL returns the URL of a lock table in a new SQLite file: a backend
// that separate distlock processes share, with no server to start.
func fileURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "locks.db")
}

// TestRunRefusesMem: a run, a process of its own, refuses mem://, whose
// locks would exclude no other run.
func TestRunRefusesMem(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	r := runBin(t, append([]string{"run", "--url", "mem://jobs", "--key", "k", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "mem:// locks live inside one process")
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran under a mem:// lock")
	}
}

// inProcess runs the command in this process against in-process stores,
// so that a test can act on the lock (memlock.Backend.Expire) meanwhile.
func inProcess(ctx context.Context, args ...string) result {
	// CMD's output is copied into these buffers while run writes its own
	// messages.
	var stdout, stderr lockedBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	start := time.Now()
	code := c.main(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
}

// memStore returns the in-process store that a mem:// URL names, and a
// unique URL for it.
func memStore(t *testing.T) (string, *memlock.Backend) {
	t.Helper()
	u := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	c, err := distlock.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	return u, c.Backend().(*memlock.Backend)
}

func TestRunNoWaitWhenHeld(t *testing.T) {
	t.Parallel()
	u, store := memStore(t)
	l, err := distlock.New(store).Mutex("k").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	marker := filepath.Join(t.TempDir(), "ran")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r := inProcess(ctx, append([]string{"run", "--url", u, "--key", "k", "--wait", "0", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitNotObtained)
	wantOneLine(t, r.stderr, "held elsewhere")
	if r.took > 10*time.Second { // "at once", with room for a slow machine
		t.Errorf("--wait 0 took %v", r.took)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran although the lock was held")
	}

	r = inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--wait", "200ms", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitNotObtained)
	wantOneLine(t, r.stderr, "not obtained within 200ms")
	if r.took < 200*time.Millisecond {
		t.Errorf("gave up after %v, before --wait 200ms", r.took)
	}
}

func TestRunWaitsForRelease(t *testing.T) {
	t.Parallel()
	u, store := memStore(t)
	l, err := distlock.New(store).Mutex("k").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		released <- time.Now()
		_ = l.Unlock(context.Background())
	})
	marker := filepath.Join(t.TempDir(), "ran")
	r := inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--wait", "30s", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, 0)
	st, err := os.Stat(marker)
	if err != nil {
		t.Fatal("CMD did not run")
	}
	if at := <-released; st.ModTime().Before(at) {
		t.Errorf("CMD ran at %v, before the holder released at %v", st.ModTime(), at)
	}
}

// A lease that is lost while CMD runs stops CMD and ends with exitLeaseLost.
func TestRunLeaseLost(t *testing.T) {
	t.Parallel()
	for _, ignoreTerm := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore-term=%v", ignoreTerm), func(t *testing.T) {
			t.Parallel()
			u, store := memStore(t)
			dir := t.TempDir()
			ready, marker := filepath.Join(dir, "ready"), filepath.Join(dir, "signals")
			mode := []string{"hold", ready, marker}
			if ignoreTerm {
				mode = append(mode, "ignore-term")
			}
			done := make(chan result, 1)
			go func() {
				done <- inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--ttl", "300ms", "--grace", "500ms", "--"}, child(mode...)...)...)
			}()
			waitFile(t, ready, 30*time.Second)
			store.Expire("k") // the next renewal is refused
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not end after its lease was lost")
			}
			wantCode(t, r, exitLeaseLost)
			if !strings.Contains(r.stderr, `lost the lock on "k"`) || !strings.Contains(r.stderr, "exiting with 79") {
				t.Errorf("stderr does not explain:\n%s", r.stderr)
			}
			if ignoreTerm && !strings.Contains(r.stderr, "sending SIGKILL") {
				t.Errorf("stderr does not mention SIGKILL:\n%s", r.stderr)
			}
			got, _ := os.ReadFile(marker)
			if string(got) != "SIGTERM\n" {
				t.Errorf("CMD received %q, want SIGTERM", got)
			}
		})
	}
}

// A lease lost without anyone noticing before CMD ends is still reported:
// the release finds the key taken over.
func TestRunLeaseLostFoundAtRelease(t *testing.T) {
	t.Parallel()
	u, store := memStore(t)
	log := filepath.Join(t.TempDir(), "log")
	done := make(chan result, 1)
	go func() {
		// The first renewal would come after 20s: only the release can tell.
		done <- inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--ttl", "60s", "--"}, child("record", log, "1s")...)...)
	}()
	waitFile(t, log, 30*time.Second)
	store.Expire("k")
	other, err := distlock.New(store).Mutex("k").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(context.Background())
	r := <-done
	wantCode(t, r, exitLeaseLost)
	wantOneLine(t, r.stderr, "no longer held")
}

// inTerminal runs shell line under script(1), which gives it a terminal,
// and returns a function that waits until the terminal shows want, and one
// that types.
func inTerminal(t *testing.T, line string) (expect func(want string) string, typ func(string)) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("uses util-linux script(1)")
	}
	script := requireTool(t, "script", "bsdutils")
	cmd := exec.Command(script, "-qec", line, "/dev/null")
	out := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	expect = func(want string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := strings.ReplaceAll(out.String(), "\r", "")
			if strings.Contains(got, want) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("terminal does not show %q within 30s:\n%s", want, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	typ = func(s string) {
		if _, err := io.WriteString(stdin, s); err != nil {
			t.Fatal(err)
		}
	}
	return expect, typ
}

// With a terminal on stdin, CMD gets the terminal while it runs (it can read
// it) and run takes it back afterwards.
func TestRunTerminal(t *testing.T) {
	t.Parallel()
	// The shell reads the terminal after run: that only works if run gave
	// the terminal back.
	u := fileURL(t)
	expect, typ := inTerminal(t, binary+` run --url `+u+` --key k -- sh -c 'read x; echo "got:$x"; exit 4'; echo "rc=$?"; `+
		`read y; echo "shell:$y"; `+
		binary+` run --url `+u+` --key k -- sh -c 'echo second'; echo "rc=$?"`)
	typ("hello\nworld\n")
	expect("got:hello\nrc=4\nshell:world\nsecond\nrc=0\n")
}

// Ctrl-Z suspends CMD and run as one job, and fg resumes both.
func TestRunTerminalSuspend(t *testing.T) {
	t.Parallel()
	requireTool(t, "bash", "bash")
	expect, typ := inTerminal(t, `bash -c 'set -m; `+binary+` run --url `+fileURL(t)+` --key k -- sh -c "echo reading; read x; echo got:\$x; exit 5"; `+
		`echo "stopped=$?"; fg; echo "rc=$?"'`)
	expect("reading\n")
	typ("\x1a") // Ctrl-Z
	expect("stopped=147")
	typ("hello\n")
	expect("got:hello\nrc=5\n")
}

// requireTool returns the path of a tool a terminal test needs. Where it is
// missing the test is skipped, except under make test
// (DISTLOCK_REQUIRE_SERVERS=1), where a missing tool is a failure:
// scripts/install-deps.sh installs it.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s not found; install it with scripts/install-deps.sh or apt-get install %s", name, pkg)
	if os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
