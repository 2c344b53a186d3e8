package main

import (
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cmd := []string{"--", "true"}
	tests := []struct {
		name string
		args []string
		want string // in the one line on stderr
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"run without URL", append([]string{"run", "--key", "k"}, cmd...), "no backend URL"},
		{"run malformed URL", append([]string{"run", "--url", "redis://h:port/0", "--key", "k"}, cmd...), "malformed backend URL"},
		{"run URL without scheme", append([]string{"run", "--url", "/tmp/x", "--key", "k"}, cmd...), "no scheme"},
		{"run host:port URL", append([]string{"run", "--url", "localhost:6379", "--key", "k"}, cmd...), "did you mean redis://localhost:6379?"},
		{"run IP:port URL", append([]string{"run", "--url", "127.0.0.1:6379", "--key", "k"}, cmd...), "has no scheme: did you mean redis://127.0.0.1:6379? A URL starts with its backend's scheme (this build knows: "},
		{"status host URL", []string{"status", "--url", "redishost", "k"}, "did you mean redis://redishost?"},
		{"run -c and CMD", []string{"run", "--url", "mem://", "k", "-c", "true", "--", "true"}, "-c and CMD cannot be combined"},
		{"run empty -c", []string{"run", "--url", "mem://", "k", "-c", " "}, "-c: empty shell command"},
		{"run unknown scheme", append([]string{"run", "--url", "zk2://h:1", "--key", "k"}, cmd...), `unknown backend URL scheme "zk2"`},
		{"run invalid URL for its scheme", append([]string{"run", "--url", "redis+cluster://", "--key", "k"}, cmd...), "invalid backend URL"},
		{"run missing key", append([]string{"run", "--url", "mem://"}, cmd...), "missing KEY: give it with --key KEY or before CMD"},
		{"run empty key", append([]string{"run", "--url", "mem://", ""}, cmd...), "empty KEY"},
		{"run empty --key", append([]string{"run", "--url", "mem://", "--key", ""}, cmd...), "empty KEY"},
		{"run missing CMD", []string{"run", "--url", "mem://", "--key", "k"}, "missing CMD"},
		{"run missing CMD after --", []string{"run", "--url", "mem://", "--key", "k", "--"}, "missing CMD"},
		{"run empty CMD", []string{"run", "--url", "mem://", "--key", "k", "--", ""}, "CMD is empty"},
		{"run bad wait", append([]string{"run", "--url", "mem://", "--key", "k", "--wait", "soon"}, cmd...), "-wait"},
		{"run negative wait", append([]string{"run", "--url", "mem://", "--key", "k", "--wait", "-1s"}, cmd...), "negative"},
		{"run TTL too short", append([]string{"run", "--url", "mem://", "--key", "k", "--ttl", "1ms"}, cmd...), "--ttl 1ms is shorter"},
		{"run bad TTL", append([]string{"run", "--url", "mem://", "--key", "k", "--ttl", "forever"}, cmd...), "-ttl"},
		{"run negative grace", append([]string{"run", "--url", "mem://", "--key", "k", "--grace", "-1s"}, cmd...), "--grace -1s is negative"},
		{"run unknown flag", append([]string{"run", "--url", "mem://", "--key", "k", "--frob"}, cmd...), "-frob"},
		{"run key too long", append([]string{"run", "--url", "mem://", "--key", strings.Repeat("k", 2000)}, cmd...), "longer than"},
		{"status without keys", []string{"status", "--url", "mem://"}, "missing KEY"},
		{"status empty key", []string{"status", "--url", "mem://", ""}, "empty KEY"},
		{"status unknown flag", []string{"status", "--url", "mem://", "k", "--yaml"}, "-yaml"},
		{"status without URL", []string{"status", "k"}, "no backend URL"},
		{"demo zero rounds", []string{"demo", "--rounds", "0"}, "--rounds 0"},
		{"demo one doctor", []string{"demo", "--doctors", "1"}, "--doctors 1"},
		{"demo in-process backend", []string{"demo", "--url", "mem://"}, "separate processes"},
		{"demo argument", []string{"demo", "now"}, `unexpected argument "now"`},
		{"help unknown command", []string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{"version argument", []string{"version", "1"}, `unexpected argument "1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runInProcess(t, tt.args...)
			wantCode(t, r, exitUsage)
			wantOneLine(t, r.stderr, tt.want)
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
}

func wantOneLine(t *testing.T, stderr, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line:\n%s", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
	if !strings.HasPrefix(stderr, "distlock") {
		t.Errorf("stderr %q does not start with \"distlock\"", stderr)
	}
}

func TestUsageErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"redis://user:hunter2@h:port/0", "zk9://user:hunter2@h:1/", "redis+sentinel://user:hunter2@h/"} {
		r := runInProcess(t, "run", "--url", u, "--key", "k", "--", "true")
		wantCode(t, r, exitUsage)
		if strings.Contains(r.stderr, "hunter2") {
			t.Errorf("%s: the password is in the message: %s", u, r.stderr)
		}
	}
}

// The issue's own cases, through the built binary.
func TestUsageErrorsBinary(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "--url", "redis://[::1", "--key", "k", "--", "true"},
		{"run", "--url", "nope://x", "--key", "k", "--", "true"},
		{"run", "--url", "mem://", "--", "true"},
		{"run", "--url", "mem://", "--key", "k"},
		{"status", "--url", "mem://"},
		{},
	} {
		r := runBin(t, args...)
		if r.code != exitUsage {
			t.Errorf("distlock %q: exit status %d, want %d; stderr: %s", args, r.code, exitUsage, r.stderr)
		}
		if len(args) > 0 && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("distlock %q: stderr is not one line:\n%s", args, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"}, {"help", "help"},
		{"run", "-h"}, {"run", "--help"}, {"help", "run"},
		{"status", "-h"}, {"help", "status"},
		{"demo", "-h"}, {"help", "demo"},
		{"version", "-h"},
	} {
		r := runInProcess(t, args...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("distlock %q: status %d, stderr %q", args, r.code, r.stderr)
		}
		for _, want := range []string{"Usage:", "Exit status:", "64 ", "75 ", "79 "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("distlock %q: help lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
	// The hidden doctor is not advertised.
	if r := runInProcess(t, "help"); strings.Contains(r.stdout, doctorCommand) {
		t.Errorf("help lists %s:\n%s", doctorCommand, r.stdout)
	}
}

func TestNoArguments(t *testing.T) {
	t.Parallel()
	r := runInProcess(t)
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("no usage on stderr:\n%s", r.stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runInProcess(t, "version")
	wantCode(t, r, exitOK)
	if !strings.HasPrefix(r.stdout, "distlock ") {
		t.Errorf("version printed %q", r.stdout)
	}
}
