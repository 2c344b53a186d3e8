package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
)

// blipClient returns a client that reaches srv through a proxy that can
// cut the connection, set up as the package documentation recommends.
func blipClient(t *testing.T, srv *testserver.Redis) (*redis.Client, *testserver.Proxy) {
	proxy := testserver.StartProxy(t, srv.Addr())
	rdb := redistest.Client(t, proxy.Addr(), func(o *redis.Options) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
	})
	return rdb, proxy
}

// TestUnlockSurvivesBlip: the connection to the server is cut for 300ms
// just as Unlock starts. Unlock returns nil only once the release has run,
// and then the key is free at once, not for the rest of its TTL.
func TestUnlockSurvivesBlip(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb, proxy := blipClient(t, srv)
	c := distlock.New(newBackend(t, rdb), distlock.WithTTL(time.Minute))
	key := t.Name()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		time.Sleep(300 * time.Millisecond)
		proxy.Restore()
	}()
	err = l.Unlock(ctx)
	<-restored
	if err != nil {
		t.Fatalf("Unlock across a 300ms blip: %v; want nil", err)
	}
	other := distlock.New(newBackend(t, newClient(t, srv.Addr()))).Mutex(key)
	l2, err := other.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock by another client right after Unlock returned nil: %v; want the key free", err)
	}
	_ = l2.Unlock(ctx)
}

// TestReleaseFailsPromptlyWhileCut: while the connection is cut, each
// Release returns an error at once (the root package repeats it), and one
// on a link that swallows everything ends with its context: none hangs.
func TestReleaseFailsPromptlyWhileCut(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb, proxy := blipClient(t, srv)
	b := newBackend(t, rdb)
	lease := driver.Lease{Key: t.Name(), Owner: "owner"}
	bg := context.Background()
	if g, err := b.Acquire(bg, driver.Request{Lease: lease, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	proxy.Cut()
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	start := time.Now()
	err := b.Release(ctx, lease)
	cancel()
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release while cut: %v; want a connection error", err)
	}
	// A refused connection fails well before the context's deadline;
	// the bound is generous for a loaded machine.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Release while cut took %v; want an error long before its 20s context", d)
	}
	proxy.Restore()
	proxy.Blackhole()
	defer proxy.Restore()
	ctx, cancel = context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := b.Release(ctx, lease); err == nil {
		t.Fatal("Release through a black hole succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Release through a black hole took %v; want it to end with its 500ms context", d)
	}
}
