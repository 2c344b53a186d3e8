//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// kindWait is the --wait of the runs that meet a key held as another kind:
// they must fail at once, not wait it out.
const kindWait = "15s"

// TestRunKindMismatch: a run that asks for a key as another kind of lock
// than it is held as (a mutex, a semaphore of another size, a side of a
// read-write lock) does not run CMD beside the holder, and does not wait
// out --wait: it exits 65 at once, naming both kinds in run's flags,
// whatever --conflict-exit says.
func TestRunKindMismatch(t *testing.T) {
	t.Parallel()
	hold := map[string]func(ctx context.Context, c *distlock.Client) (*distlock.Lock, error){
		"mutex": func(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
			return c.Mutex("mix").TryLock(ctx)
		},
		"semaphore 2": func(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
			return c.Semaphore("mix", 2).TryAcquire(ctx)
		},
		"reader": func(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
			return c.RWMutex("mix").TryRLock(ctx)
		},
		"writer": func(ctx context.Context, c *distlock.Client) (*distlock.Lock, error) {
			return c.RWMutex("mix").TryLock(ctx)
		},
	}
	cases := []struct {
		held  string
		flags []string
		want  []string // in the message: the held kind, then the asked one
	}{
		{"semaphore 2", nil, []string{"semaphore of 2 permits (run --limit 2)", "a mutex (run without"}},
		{"mutex", []string{"--limit", "2"}, []string{"a mutex", "a semaphore of 2 permits"}},
		{"reader", []string{"--limit", "2"}, []string{"a read-write lock", "a semaphore of 2 permits"}},
		{"semaphore 2", []string{"--shared"}, []string{"semaphore of 2 permits", "the read side of a read-write lock (run --shared)"}},
		{"semaphore 2", []string{"--limit", "5"}, []string{"semaphore of 2 permits", "semaphore of 5 permits (run --limit 5)"}},
		{"mutex", []string{"--exclusive"}, []string{"a mutex", "the write side of a read-write lock (run --exclusive)"}},
		{"writer", nil, []string{"a read-write lock", "a mutex"}},
		// Not a conflict: a quiet skip would skip every turn for good.
		{"semaphore 2", []string{"--conflict-exit", "0"}, []string{"semaphore of 2 permits", "a mutex"}},
	}
	for _, tc := range cases {
		t.Run(tc.held+" "+strings.Join(tc.flags, " "), func(t *testing.T) {
			t.Parallel()
			u, store := memStore(t)
			l, err := hold[tc.held](t.Context(), distlock.New(store))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(context.Background())
			marker := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--url", u, "--key", "mix", "--wait", kindWait}, tc.flags...)
			r := inProcess(t.Context(), append(append(args, "--"), child("record", marker, "0s")...)...)
			checkKindMismatch(t, r, marker, tc.want...)
		})
	}
}

// checkKindMismatch checks that r is a run refused for a key held as
// another kind, whose CMD would have created marker, and whose message
// names want.
func checkKindMismatch(t *testing.T, r result, marker string, want ...string) {
	t.Helper()
	wantCode(t, r, exitKindMismatch)
	for _, w := range want {
		wantOneLine(t, r.stderr, w)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran beside a holder of another kind")
	}
	if r.took > 10*time.Second { // at once, with room for a slow machine
		t.Errorf("took %v: waited for a kind that does not change", r.took)
	}
}

// TestRunKindMismatchServers is TestRunKindMismatch through separate
// processes on real servers, for the pairs that ran together before:
// --limit 2 beside a plain run, beside --shared, and beside --limit 5.
func TestRunKindMismatchServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string { _, u := startRedis(t); return u }},
		{"postgres", func(t *testing.T) string { return testserver.StartPostgres(t).URL() }},
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "locks.db") }},
		{"zk", func(t *testing.T) string {
			return "zk://" + testserver.StartZooKeeper(t).Addr() + "/distlock-kind?session_timeout=6s"
		}},
		{"etcd", func(t *testing.T) string { return "etcd://" + strings.Join(testserver.StartEtcd(t, 1), ",") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := tc.url(t)
			holder, _ := holdLock(t, u, "mix", "--limit", "2")
			marker := filepath.Join(t.TempDir(), "ran")
			for _, flags := range [][]string{nil, {"--shared"}, {"--exclusive"}, {"--limit", "5"}} {
				args := append([]string{"run", "--url", u, "--key", "mix", "--wait", kindWait}, flags...)
				r := runBin(t, append(append(args, "--"), child("record", marker, "0s")...)...)
				t.Run(strings.Join(append([]string{"with"}, flags...), " "), func(t *testing.T) {
					checkKindMismatch(t, r, marker, "semaphore of 2 permits")
				})
			}
			// The same kind is no mistake: the second permit is free.
			r := runBin(t, append([]string{"run", "--url", u, "--key", "mix", "--limit", "2", "--wait", "0", "--"}, child("exit", "0")...)...)
			wantCode(t, r, 0)
			_ = holder.cmd.Process.Kill()
		})
	}
}

func TestHelpDocumentsKindMismatch(t *testing.T) {
	t.Parallel()
	r := runInProcess(t, "run", "-h")
	for _, want := range []string{"exits 65 at once", "65     run: KEY is held as another kind of lock"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run -h lacks %q:\n%s", want, r.stdout)
		}
	}
}
