package redislock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redislock"
)

// guardedAfterRestart reports whether a new key is held back by the
// restart guard on the server at addr, for a backend with opts, and fails
// t on any other outcome than a grant or the guard's refusal.
func guardedAfterRestart(t *testing.T, addr string, opts ...redislock.Option) bool {
	t.Helper()
	ctx := context.Background()
	c := distlock.New(newBackend(t, newClient(t, addr), opts...), distlock.WithTTL(time.Second))
	l, err := c.Mutex("new-" + t.Name()).TryLock(ctx)
	switch {
	case err == nil:
		_ = l.Unlock(ctx)
		return false
	case errors.Is(err, distlock.ErrRestartGuard):
		return true
	default:
		t.Fatalf("TryLock of a new key after a restart: %v; want a grant or ErrRestartGuard", err)
		return false
	}
}

// TestDurableServers: a server that writes every command to its
// append-only file before answering (appendfsync always) and restarts from
// it has lost no lease, so with WithDurableServers the restart guard lets
// new keys through at once. Without the option, on a server without an
// append-only file, or on one restarted without its files, new keys still
// wait.
func TestDurableServers(t *testing.T) {
	ctx := context.Background()
	durable := redislock.WithDurableServers()

	// A server that keeps every write, restarted after a crash.
	srv := testserver.StartRedis(t, testserver.WithPersistence())
	l, err := distlock.New(newBackend(t, newClient(t, srv.Addr()))).Mutex("before").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token := l.Token()
	srv.Kill(t)
	srv.Restart(t)
	if !guardedAfterRestart(t, srv.Addr()) {
		t.Errorf("without WithDurableServers, a new key was granted on a server that had run for less than the maximum lease")
	}
	if guardedAfterRestart(t, srv.Addr(), durable) {
		t.Errorf("with WithDurableServers, a new key waited on a server that loaded back all its data")
	}
	// The lock held at the crash came back with the data: it is still held.
	if _, err := distlock.New(newBackend(t, newClient(t, srv.Addr()), durable)).Mutex("before").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) || errors.Is(err, distlock.ErrRestartGuard) {
		t.Errorf("the lock held at the crash: TryLock %v; want it held (token %d)", err, token)
	}

	// The same server restarted without its files: nothing proves that
	// nothing was lost.
	srv.Kill(t)
	if err := os.RemoveAll(filepath.Join(srv.Dir(), "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	if !guardedAfterRestart(t, srv.Addr(), durable) {
		t.Errorf("with WithDurableServers, a new key was granted on a server restarted without its files")
	}

	// A server whose data came back from a snapshot, which can be older
	// than the last grants: the option is not taken at its word.
	snap := testserver.StartRedis(t, testserver.WithArgs("--save", "3600 1"))
	if _, err := distlock.New(newBackend(t, newClient(t, snap.Addr()))).Mutex("before").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	snap.Stop(t) // a graceful stop writes the snapshot, marker included
	snap.Restart(t)
	if v, err := snap.Do(t, "EXISTS", testserver.FreshMarker); err != nil || v != "1" {
		t.Fatalf("the guard's marker after a restart from a snapshot: %q, %v; want it loaded back", v, err)
	}
	if !guardedAfterRestart(t, snap.Addr(), durable) {
		t.Errorf("with WithDurableServers, a new key was granted on a server without an append-only file")
	}
}

// TestURLDurableServers: restart_guard=durable in a URL is WithDurableServers.
// Each case has a server of its own: a durable client's grant records that
// the server's life follows no loss, which then lets any client in.
func TestURLDurableServers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		query   string
		guarded bool
	}{{"", true}, {"?restart_guard=durable", false}} {
		srv := testserver.StartRedis(t, testserver.WithPersistence())
		srv.Kill(t)
		srv.Restart(t)
		c, err := distlock.Open(ctx, "redis://"+srv.Addr()+"/0"+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Mutex("new").TryLock(ctx)
		if got := errors.Is(err, distlock.ErrRestartGuard); got != tc.guarded {
			t.Errorf("%q: TryLock of a new key after a restart: %v; want held back by the guard: %v", tc.query, err, tc.guarded)
		}
		if err == nil {
			_ = l.Unlock(ctx)
		}
		c.Close()
	}
}
