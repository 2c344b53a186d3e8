//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestRunKeyAsArgument: KEY may be the first argument, before CMD, as
// etcdctl lock and flock take it, with flags before or after it and with
// or without -- before CMD; an argument after -- is CMD, never KEY.
func TestRunKeyAsArgument(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nightly", "--"},
		{"nightly"},
		{"--ttl", "10s", "nightly", "--wait", "0", "--"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			u, _ := memStore(t)
			r := inProcess(t.Context(), append(append([]string{"run", "--url", u}, args...), child("env")...)...)
			wantCode(t, r, 0)
			if got, want := r.stdout, "nightly 1\n"; got != want {
				t.Errorf("CMD saw DISTLOCK_KEY DISTLOCK_TOKEN = %q, want %q", got, want)
			}
		})
	}
	r := runInProcess(t, append([]string{"run", "--url", "mem://", "--"}, child("env")...)...)
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "missing KEY")
}

// TestRunLimitZero: --limit 0 is refused, not taken for a plain lock.
func TestRunLimitZero(t *testing.T) {
	t.Parallel()
	r := runInProcess(t, append([]string{"run", "--url", "mem://", "--key", "k", "--limit", "0", "--"}, child("exit", "0")...)...)
	wantCode(t, r, exitUsage)
	wantOneLine(t, r.stderr, "--limit 0: want at least 1")
}
