//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runInProcessEnv is runInProcess with env (NAME=value) as the environment.
func runInProcessEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	var stdout, stderr lockedBuffer
	getenv := func(name string) string {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v
			}
		}
		return ""
	}
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: getenv}
	code := c.main(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestVersionFlags(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--version", "-v", "-version"} {
		r := runBin(t, flag)
		wantCode(t, r, exitOK)
		if !strings.HasPrefix(r.stdout, "distlock ") || r.stderr != "" {
			t.Errorf("distlock %s: stdout %q, stderr %q", flag, r.stdout, r.stderr)
		}
	}
}

// Flag errors name the flag as the user typed it and say how to fix the
// value; the environment's values are named by their variable.
func TestFlagErrorSpelling(t *testing.T) {
	t.Parallel()
	cmd := []string{"--", "true"}
	run := func(extra ...string) []string {
		return append(append([]string{"run", "--url", "mem://", "--key", "k"}, extra...), cmd...)
	}
	tests := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, run("--ttl", "5"), "distlock run: --ttl 5: missing unit, e.g. 5s"},
		{nil, run("-ttl=1.5"), "-ttl 1.5: missing unit, e.g. 1.5s"},
		{nil, run("--ttl", "soon"), "--ttl soon: want a duration such as 30s"},
		{nil, run("--wait", "3"), "--wait 3: missing unit, e.g. 3s"},
		{nil, run("--grace", "2"), "--grace 2: missing unit"},
		{nil, run("--limit", "two"), "--limit two: want a whole number"},
		{nil, run("--limit", "-1"), "--limit -1: want at least 1"},
		{nil, run("--limit", "2", "--shared"), "--limit cannot be combined"},
		{nil, run("--shared", "--exclusive"), "--shared and --exclusive cannot be combined"},
		{nil, run("--conflict-exit", "256"), "--conflict-exit 256: want a status from 0 to 255"},
		{nil, run("--frob"), "unknown flag --frob"},
		{nil, []string{"run", "--url", "mem://", "--key", "k", "--ttl"}, "--ttl needs a value"},
		{nil, []string{"status", "--url", "mem://", "--json=maybe", "k"}, "--json maybe: want true or false"},
		{[]string{"DISTLOCK_TTL=5"}, run(), "$DISTLOCK_TTL=5: missing unit, e.g. 5s"},
		{[]string{"DISTLOCK_JSON=maybe"}, []string{"status", "--url", "mem://", "k"}, "$DISTLOCK_JSON=maybe: want true or false"},
		// The flag wins: the environment's bad value is not even read.
		{[]string{"DISTLOCK_TTL=5", "DISTLOCK_WAIT=x"}, run("--ttl", "1ms", "--wait", "0"), "--ttl 1ms is shorter"},
	}
	for _, tt := range tests {
		r := runInProcessEnv(t, tt.env, tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("env %q, distlock %q: status %d, stderr %q; want %d and %q", tt.env, tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
}

func TestHelpDocumentsEnvironment(t *testing.T) {
	t.Parallel()
	r := runInProcess(t, "run", "-h")
	for _, want := range []string{"$DISTLOCK_TTL", "$DISTLOCK_WAIT", "$DISTLOCK_GRACE", "$DISTLOCK_LIMIT", "$DISTLOCK_SHARED",
		"$DISTLOCK_CONFLICT_EXIT", "flag wins", "--conflict-exit", "flock -n alone exits 1", "1      status: a KEY is free"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run -h lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "$DISTLOCK_KEY)") {
		t.Error("run -h offers $DISTLOCK_KEY for --key, which run sets for CMD")
	}
	if r := runInProcess(t, "status", "-h"); !strings.Contains(r.stdout, "exits 0 when every KEY is held and 1 when one is free") {
		t.Errorf("status -h does not document its exit statuses:\n%s", r.stdout)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, shell := range shells {
		r := runInProcess(t, "completion", shell)
		wantCode(t, r, exitOK)
		for _, want := range []string{"run", "status", "demo", "completion", "--version",
			"conflict-exit", "limit", "shared", "exclusive", "ttl", "wait", "json", "rounds"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s completion lacks %q", shell, want)
			}
		}
		if strings.Contains(r.stdout, doctorCommand) {
			t.Errorf("%s completion offers the hidden %s", shell, doctorCommand)
		}
		script := filepath.Join(dir, "distlock."+shell)
		if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		if path, err := exec.LookPath(shell); err == nil {
			if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		} else {
			t.Logf("%s not installed: its script's syntax is not checked", shell)
		}
	}
	if r := runInProcess(t, "completion", "tcsh"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: %d %q", r.code, r.stderr)
	}

	// bash: what the function offers for a few command lines.
	bash := requireTool(t, "bash", "bash")
	for line, want := range map[string][]string{
		"distlock ":                       {"run", "status", "completion", "--version"},
		"distlock ru":                     {"run"},
		"distlock run --li":               {"--limit"},
		"distlock run --url x --con":      {"--conflict-exit"},
		"distlock status --j":             {"--json"},
		"distlock completion ":            {"bash", "zsh", "fish"},
		"distlock help st":                {"status"},
		"distlock run --key k -- distloc": {"distlock"}, // a command, from PATH
	} {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		sh := "source " + filepath.Join(dir, "distlock.bash") + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_distlock\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		cmd := exec.Command(bash, "--norc", "-c", sh)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", line, err, out)
			continue
		}
		got := strings.Fields(string(out))
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("completing %q offers %q, want %q among them", line, got, w)
			}
		}
	}
}

// status exits 0 for a held key and 1 for a free one, so that a shell's
// `if` can ask; 69 when the backend cannot tell.
func TestStatusExitStatusRedis(t *testing.T) {
	t.Parallel()
	srv, u := startRedis(t)
	wantCode(t, runBin(t, "status", "--url", u, "free"), exitFree)
	wantCode(t, runBin(t, "status", "--url", u, "--json", "free"), exitFree)

	holder, _ := holdLock(t, u, "held")
	r := runBin(t, "status", "--url", u, "held")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "held") {
		t.Errorf("status output:\n%s", r.stdout)
	}
	wantCode(t, runBin(t, "status", "--url", u, "held", "free"), exitFree)

	out, err := exec.Command("sh", "-c", `for k in held free; do if "$0" status --url "$1" "$k" >/dev/null 2>&1; then echo "$k: held"; else echo "$k: $?"; fi; done`, binary, u).CombinedOutput()
	if err != nil || string(out) != "held: held\nfree: 1\n" {
		t.Errorf("if distlock status: %v\n%s", err, out)
	}

	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	holder.wait(t, 30*time.Second)
	srv.Stop(t)
	wantCode(t, runBin(t, "status", "--url", u, "held"), exitUnavailable)
}

// --limit N lets N runs hold the key at once, and the next one waits or,
// with --wait 0, exits 75.
func TestRunLimitRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	first, _ := holdLock(t, u, "sem", "--limit", "2")
	holdLock(t, u, "sem", "--limit", "2")
	marker := filepath.Join(t.TempDir(), "ran")
	r := runBin(t, append([]string{"run", "--url", u, "--key", "sem", "--limit", "2", "--wait", "0", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitNotObtained)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a third run ran under --limit 2")
	}
	st := runBin(t, "status", "--url", u, "--json", "sem")
	if !strings.Contains(st.stdout, `"kind": "permit"`) || !strings.Contains(st.stdout, `"holds": 2`) {
		t.Errorf("status of the semaphore:\n%s", st.stdout)
	}

	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	first.wait(t, 30*time.Second)
	r = runBin(t, append([]string{"run", "--url", u, "--key", "sem", "--limit", "2", "--wait", "10s", "--"}, child("record", marker, "0s")...)...)
	wantCode(t, r, exitOK)
	if _, err := os.Stat(marker); err != nil {
		t.Error("no run ran once a permit was free")
	}
}

// --shared runs hold the key together; an --exclusive one does not get it
// while they do, and gets it once they are done.
func TestRunSharedRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	r1, _ := holdLock(t, u, "rw", "--shared")
	r2, _ := holdLock(t, u, "rw", "--shared") // both at once: holdLock waits until CMD runs
	wantCode(t, runBin(t, "run", "--url", u, "--key", "rw", "--exclusive", "--wait", "0", "--", "true"), exitNotObtained)
	st := runBin(t, "status", "--url", u, "--json", "rw")
	if !strings.Contains(st.stdout, `"kind": "read"`) || !strings.Contains(st.stdout, `"holds": 2`) {
		t.Errorf("status of the shared lock:\n%s", st.stdout)
	}
	for _, p := range []*process{r1, r2} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t, 30*time.Second)
	}
	w, _ := holdLock(t, u, "rw", "--exclusive")
	wantCode(t, runBin(t, "run", "--url", u, "--key", "rw", "--shared", "--wait", "0", "--", "true"), exitNotObtained)
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	w.wait(t, 30*time.Second)
}

// --conflict-exit replaces 75 for a lock held elsewhere, like flock -E;
// the environment sets it too, and the flag wins.
func TestRunConflictExitRedis(t *testing.T) {
	t.Parallel()
	_, u := startRedis(t)
	holdLock(t, u, "busy")
	marker := filepath.Join(t.TempDir(), "ran")
	args := func(extra ...string) []string {
		return append(append([]string{"run", "--url", u, "--key", "busy"}, extra...), append([]string{"--"}, child("record", marker, "0s")...)...)
	}
	// 0 skips quietly, as flock -n -E 0: nothing for cron to mail.
	r := runBin(t, args("--wait", "0", "--conflict-exit", "0")...)
	wantCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("--conflict-exit 0 printed %q; want a quiet skip", r.stderr)
	}
	wantCode(t, runBin(t, args("--wait", "0", "--conflict-exit", "1")...), 1)
	wantCode(t, startBinEnv(t, []string{"DISTLOCK_WAIT=0", "DISTLOCK_CONFLICT_EXIT=3"}, args()...).wait(t, 60*time.Second), 3)
	wantCode(t, startBinEnv(t, []string{"DISTLOCK_WAIT=0", "DISTLOCK_CONFLICT_EXIT=3"}, args("--conflict-exit", "4")...).wait(t, 60*time.Second), 4)
	// A wait that runs out is a conflict too.
	wantCode(t, runBin(t, args("--wait", "200ms", "--conflict-exit", "5")...), 5)
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran although the lock was held")
	}
}
