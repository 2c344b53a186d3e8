package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// binary is the distlock command built once for this test binary.
var binary string

// testExe is this test binary, which plays CMD (see child_test.go).
var testExe string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "distlock-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "distlock")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building distlock: %v\n", err)
		return 1
	}
	if raceEnabled {
		// A race-enabled program sleeps a second at exit by default; the
		// binary and CMD (this test binary) would add two to every run.
		// A race they detect still shows as exit status 66.
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	if testExe, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// result is how a distlock process ended.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// process is a distlock process started by a test.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	start          time.Time
	done           chan struct{}
	res            result
}

// startBin starts the distlock binary with args. The process is killed
// when the test ends, if it is still running.
func startBin(t *testing.T, args ...string) *process {
	t.Helper()
	return startBinEnv(t, nil, args...)
}

// startBinEnv is startBin with env added to the environment.
func startBinEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startProg(t, binary, env, args...)
}

// startProg is startBinEnv for another program, such as one that runs
// distlock.
func startProg(t *testing.T, prog string, env []string, args ...string) *process {
	t.Helper()
	p := &process{stdout: new(bytes.Buffer), stderr: new(bytes.Buffer), done: make(chan struct{})}
	p.cmd = exec.Command(prog, args...)
	// No stray backend from the environment.
	p.cmd.Env = append(append(os.Environ(), urlEnv+"="), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting distlock: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		// ExitCode is -1 if distlock itself was killed by a signal.
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(p.start)}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit, failing the test if that takes more
// than timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("distlock %s did not exit within %v; stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), timeout, p.res.stderr)
		return result{}
	}
}

// runBin runs the distlock binary to its end.
func runBin(t *testing.T, args ...string) result {
	t.Helper()
	return startBin(t, args...).wait(t, 60*time.Second)
}

// runInProcess runs the command in this process, as main would.
func runInProcess(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr lockedBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	start := time.Now()
	code := c.main(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
}

// child returns the argv of a CMD that does what mode says (see childMain).
func child(mode ...string) []string {
	return append([]string{testExe, childArg}, mode...)
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantCode fails the test unless r ended with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}
