//go:build unix

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunLogsLoss: with --log-level info --log-format json, run logs the
// acquisition and the loss of the lease with its cause, as JSON on stderr.
func TestRunLogsLoss(t *testing.T) {
	t.Parallel()
	u, store := memStore(t)
	dir := t.TempDir()
	ready, marker := filepath.Join(dir, "ready"), filepath.Join(dir, "signals")
	done := make(chan result, 1)
	go func() {
		done <- inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--ttl", "300ms", "--grace", "500ms",
			"--log-level", "info", "--log-format", "json", "--"}, child("hold", ready, marker)...)...)
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
	var msgs []string
	for line := range strings.Lines(r.stderr) {
		if !strings.HasPrefix(line, "{") {
			continue // run's own messages
		}
		var rec struct {
			Level, Msg, Key, Cause, Backend string
			Token                           uint64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec.Key != "k" || rec.Token == 0 {
			t.Errorf("log line without key or token: %s", line)
		}
		if strings.HasPrefix(rec.Msg, "distlock: ") && rec.Backend != "memlock" {
			t.Errorf("library log line without backend memlock: %s", line)
		}
		if rec.Level == "WARN" && rec.Cause == "" {
			t.Errorf("warning without a cause: %s", line)
		}
		msgs = append(msgs, rec.Level+" "+rec.Msg)
	}
	// The library's warning and run's come in either order: run learns of
	// the loss from Lock.Done, the logger just after it closes.
	if len(msgs) == 3 && msgs[1] > msgs[2] {
		msgs[1], msgs[2] = msgs[2], msgs[1]
	}
	want := []string{
		"INFO distlock run: acquired",
		"WARN distlock run: lease lost while CMD runs: stopping it",
		"WARN distlock: lease lost",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s\nstderr:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"), r.stderr)
	}
	if strings.Contains(r.stderr, u) {
		t.Errorf("the URL is in the log:\n%s", r.stderr)
	}
}

// TestRunQuietByDefault: without --log-level, run writes only its own
// messages (none for a run that goes well).
func TestRunQuietByDefault(t *testing.T) {
	t.Parallel()
	u, _ := memStore(t)
	r := inProcess(t.Context(), append([]string{"run", "--url", u, "--key", "k", "--"}, child("exit", "0")...)...)
	wantCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr: %q; want nothing", r.stderr)
	}
}

func TestRunLogFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"--log-level loud", `--log-level "loud": want debug, info, warn or error`},
		{"--log-level info --log-format xml", `--log-format "xml": want text or json`},
		{"--log-format yaml", `--log-format "yaml": want text or json`},
	} {
		r := inProcess(t.Context(), append(append([]string{"run", "--url", "mem://", "--key", "k"}, strings.Fields(tc.args)...), "--", "true")...)
		wantCode(t, r, exitUsage)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: stderr %q; want %q", tc.args, r.stderr, tc.want)
		}
	}
}
