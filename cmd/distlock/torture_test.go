package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/internal/testserver"
)

// tortureReport is the part of torture's JSON report the tests read.
type tortureReport struct {
	Operations struct {
		Grants         int `json:"grants"`
		WritesAccepted int `json:"writes_accepted"`
	} `json:"operations"`
	FaultCounts     map[string]int `json:"faults_injected"`
	ViolationCounts map[string]int `json:"violation_counts"`
	Violations      []struct {
		Kind, Detail string
	} `json:"violations"`
	History struct {
		Workers []struct {
			ID         string `json:"id"`
			Errors     int    `json:"errors"`
			FirstError string `json:"first_error"`
		} `json:"workers"`
	} `json:"history"`
}

// lockErrors lists the first failed Lock call of each worker that had one.
func (r tortureReport) lockErrors() string {
	var b strings.Builder
	for _, w := range r.History.Workers {
		if w.Errors > 0 {
			fmt.Fprintf(&b, "\n  worker %s: %d failed, first: %s", w.ID, w.Errors, w.FirstError)
		}
	}
	return b.String()
}

func (r tortureReport) violations() int {
	n := 0
	for _, c := range r.ViolationCounts {
		n += c
	}
	return n
}

func (r tortureReport) faults() int {
	n := 0
	for _, c := range r.FaultCounts {
		n += c
	}
	return n
}

// runTorture runs prog's torture command with args and a JSON report, and
// returns the result and the report.
func runTorture(t *testing.T, prog string, args ...string) (result, tortureReport) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testserver.Require(t, "redis-server") // skips, or fails under DISTLOCK_REQUIRE_SERVERS=1
	}
	out := filepath.Join(t.TempDir(), "report.json")
	// A generous slack: the race detector and a loaded machine delay
	// goroutines by tens of milliseconds.
	args = append([]string{"torture", "--json", out, "--slack", "300ms"}, args...)
	res := startProg(t, prog, nil, args...).wait(t, 3*60e9)
	var rep tortureReport
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no report (%v); exit %d\nstdout:\n%s\nstderr:\n%s", err, res.code, res.stdout, res.stderr)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	return res, rep
}

// TestTortureOwnServers is the short version of 'make torture': a few
// seconds per backend, with its own servers and every fault.
func TestTortureOwnServers(t *testing.T) {
	for _, tc := range []struct{ kind, seed, duration string }{
		{"redis", "1", "5s"}, {"redlock", "1", "5s"},
		// Seed 6 draws failovers, server faults and cuts early on. Locks
		// that wait for every replica are granted nothing from a failover
		// until the old master follows the new one, which the torture's
		// sentinels make about a second after it is back instead of 8 to
		// 10 (launch.SentinelConfig.QuickRejoin): with Sentinel's own
		// periods a busy machine saw 2 grants in 30s.
		{"sentinel", "6", "20s"},
		// A zk waiter keeps its place in line, so a killed or paused
		// one holds the line up until its session ends (2s): the run
		// is longer to see ten grants among seed 1's faults.
		{"zk", "1", "15s"}, {"etcd", "1", "5s"},
		{"postgres", "1", "5s"}, {"mariadb", "1", "5s"},
		// A killed or cut-off holder's lock is freed at once: the
		// exclusion check must not call the next grant an overlap.
		{"postgres-connection", "1", "5s"}, {"mariadb-connection", "1", "5s"},
		{"sqlite", "1", "5s"},
	} {
		kind := tc.kind
		t.Run(kind, func(t *testing.T) {
			bin := binary
			if kind == "zk" && raceEnabled {
				// go-zookeeper v1.0.4 reads its last zxid while re-setting
				// watches after a reconnect as its receive loop writes it
				// (samuel/go-zookeeper#260), which the race detector
				// reports from inside the client on every cut that finds
				// a watch set: zk's workers run without it, as zklock's
				// own tests do (NORACE in the Makefile).
				bin = buildWithoutRace(t)
			}
			res, rep := runTorture(t, bin, "--servers", kind, "--duration", tc.duration, "--workers", "4", "--ttl", "300ms", "--seed", tc.seed)
			t.Logf("%s", res.stdout)
			if res.code != exitOK || rep.violations() != 0 {
				t.Fatalf("exit %d, %d violations %v, want 0\nstderr:\n%s", res.code, rep.violations(), rep.Violations, res.stderr)
			}
			if rep.Operations.Grants < 10 || rep.Operations.WritesAccepted < 10 || rep.faults() < 3 {
				t.Fatalf("too little happened to prove anything: %+v, faults %v%s", rep.Operations, rep.FaultCounts, rep.lockErrors())
			}
			fc := rep.FaultCounts
			if kind == "sentinel" && (fc["failover"]+fc["failover-pause"] == 0 || fc["cut"]+fc["blackhole"] == 0) {
				t.Fatalf("no failover or no cut: faults %v", fc)
			}
		})
	}
}

// TestTortureFindsTokenRegression: a Redis server restarted without
// persistence forgets its token counter, so tokens go backwards. The
// checker must say so.
func TestTortureFindsTokenRegression(t *testing.T) {
	res, rep := runTorture(t, binary, "--servers", "redis-nopersist", "--faults", "server",
		"--duration", "6s", "--workers", "4", "--ttl", "300ms", "--seed", "1")
	t.Logf("%s", res.stdout)
	if res.code != exitViolation || rep.ViolationCounts["token-order"] == 0 {
		t.Fatalf("exit %d, violations %v; want exit 1 with token-order violations\nstderr:\n%s", res.code, rep.ViolationCounts, res.stderr)
	}
}

func TestTortureUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--servers", "consul"}, "--servers"},
		{[]string{"--url", "mem://x"}, "mem://"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--servers", "redis"}, "exclude"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--faults", "server"}, "needs --servers"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--faults", "pause,flood"}, "unknown fault"},
		{[]string{"--url", "sqlite:///nonexistent/locks.db", "--faults", "pause,cut"}, "no network connection to cut"},
		{[]string{"--url", "redis+sentinel://127.0.0.1:1/m", "--faults", "cut"}, "find their servers themselves"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--workers", "0"}, "workers"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--ttl", "1ms"}, "ttl"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "--timeline", "out.png"}, ".svg or .html"},
		{[]string{}, "no backend URL"},
		{[]string{"--url", "redis://127.0.0.1:1/0", "extra"}, "unexpected argument"},
	}
	for _, tc := range cases {
		r := runInProcess(t, append([]string{"torture"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("torture %q: exit %d, stderr %q; want 64 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestTortureUnavailable(t *testing.T) {
	r := runBin(t, "torture", "--url", "redis://127.0.0.1:1/0", "--duration", "1s")
	wantCode(t, r, exitUnavailable)
}

// buildWithoutRace builds distlock without the race detector.
func buildWithoutRace(t *testing.T) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "distlock-norace")
	if out, err := exec.Command("go", "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("building distlock without the race detector: %v\n%s", err, out)
	}
	return prog
}

// buildMutants builds distlock with the broken backends of
// torture_mutant.go, which the command users get never contains.
func buildMutants(t *testing.T) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "distlock-mutants")
	args := []string{"build", "-tags", "distlock_mutants", "-o", prog}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the mutants: %v\n%s", err, out)
	}
	return prog
}

// TestTortureCatchesMutants proves the checks can fail: each broken
// backend, run under the faults that expose it, must be reported.
func TestTortureCatchesMutants(t *testing.T) {
	srv := testserver.StartRedis(t)
	prog := buildMutants(t)
	cases := []struct {
		mutant, faults string
		want           []string // violation kinds that must be reported
	}{
		// A holder whose lease ran out (a slow holding, a pause) deletes
		// its successor's lock on release; a third is granted while the
		// successor's lease is valid.
		{"no-owner-check", "pause", []string{"exclusion"}},
		{"constant-token", "none", []string{"duplicate-token", "token-order"}},
		// A killed holder's lock never expires: nobody gets it again.
		{"no-expiry", "kill", []string{"stall"}},
		// Every worker dies at its first grant: what it did last is lost.
		{"crash", "none", []string{"worker-crash"}},
	}
	for _, tc := range cases {
		t.Run(tc.mutant, func(t *testing.T) {
			url := "mutant+redis://" + srv.Addr() + "/0?max_ttl=2h&mutant=" + tc.mutant
			res, rep := runTorture(t, prog, "--url", url, "--faults", tc.faults,
				"--duration", "6s", "--workers", "4", "--ttl", "300ms", "--seed", "1")
			t.Logf("%s", res.stdout)
			if res.code != exitViolation {
				t.Errorf("exit %d, want %d", res.code, exitViolation)
			}
			for _, k := range tc.want {
				if rep.ViolationCounts[k] == 0 {
					t.Errorf("no %s violation reported: %v\nstderr:\n%s", k, rep.ViolationCounts, res.stderr)
				}
			}
		})
	}
}

// TestMutantsStayOut: the command users get knows no mutant scheme.
func TestMutantsStayOut(t *testing.T) {
	r := runInProcess(t, "torture", "--url", "mutant+redis://127.0.0.1:1/0?mutant=no-expiry")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown backend URL scheme") {
		t.Fatalf("exit %d, stderr %q; want 64 for an unknown scheme", r.code, r.stderr)
	}
}

// TestTortureFailsWithoutTheFaultsItAskedFor: a run too short for the
// fault schedule (the first fault comes half a TTL in at the earliest)
// injected nothing it asked for, and must not pass.
func TestTortureFailsWithoutTheFaultsItAskedFor(t *testing.T) {
	res, rep := runTorture(t, binary, "--servers", "redis", "--faults", "pause,kill",
		"--duration", "2s", "--workers", "2", "--ttl", "10s", "--seed", "1")
	t.Logf("%s", res.stdout)
	if rep.Operations.Grants == 0 {
		t.Fatalf("no grant in 2s; the test needs some\nstderr:\n%s", res.stderr)
	}
	if res.code != exitViolation || !strings.Contains(res.stdout, "INCONCLUSIVE") ||
		!strings.Contains(res.stdout, "pause") || !strings.Contains(res.stdout, "kill") {
		t.Fatalf("exit %d; want %d with an INCONCLUSIVE verdict naming pause and kill\nstderr:\n%s", res.code, exitViolation, res.stderr)
	}
}
