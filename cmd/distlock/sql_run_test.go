//go:build unix

package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/testserver"
)

// TestRunSQL: on each SQL URL scheme, several distlock processes running
// under one key never overlap, each gets its turn, and each CMD is given
// the fencing token, increasing from one holder to the next. SQLite's
// processes share one file and nothing else.
func TestRunSQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme string
		url    func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return testserver.StartPostgres(t).URL() }},
		{"mysql", func(t *testing.T) string { return testserver.StartMariaDB(t).URL() }},
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "locks.db") }},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			runUnderOneKey(t, tc.url(t), 5)
		})
	}
}

// runUnderOneKey runs n distlock processes under one key of the backend at
// u, each recording its turn, and checks that the turns never overlapped
// and that each was given a greater token than the one before.
func runUnderOneKey(t *testing.T, u string, n int) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	procs := make([]*process, n)
	for i := range procs {
		procs[i] = startBin(t, append([]string{"run", "--url", u, "--key", "shared", "--wait", "forever", "--"},
			child("record", log, "50ms")...)...)
	}
	for _, p := range procs {
		wantCode(t, p.wait(t, 90*time.Second), 0)
	}
	checkNoOverlap(t, log, n)
}
