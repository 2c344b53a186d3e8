package zklock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

func TestOpenMalformedURL(t *testing.T) {
	for _, u := range []string{
		"zk://",
		"zk://h1:2181,,h2:2181",
		"zk://h1:2181?session_timeout=soon",
		"zk://h1:2181?session_timeout=-1s",
		"zk://h1:2181?connect_timeout=0s",
		"zk://h1:2181?colour=blue",
		"zk://h1:2181//",
		"zk://h1:2181/a//b",
		"zk://h1:2181/a/./b",
		"zk://h1:2181/a/..",
		"zk://h1:2181/zookeeper/locks",
		"zk://127.0.0.1:/locks",
		"zk://h1:2181,h2:/locks",
		"zk://:2181/locks",
		"zk://h1:2181,h2:0/locks",
		"zk://h1:2181,h2:65536/locks",
		"zk://h1:2181,h2:http/locks",
		"zk://h1:2181/lo%01cks",
		"zk://h1:2181/lo%7Fcks",
		"zk://h1:2181/lo%C2%85cks",
		"zk://h1:2181/lo%EE%80%80cks",
		"zk://h1:2181/lo%F0%9F%94%92cks",
		"zk://h1:2181/lo%FFcks",
		"zk://h1:2181/lo%EF%BF%BDcks",
	} {
		c, err := distlock.Open(ctxFor(t, 5*time.Second), u)
		if err == nil {
			_ = c.Close()
			t.Errorf("Open(%q) succeeded; want an error", u)
			continue
		}
		if !errors.Is(err, distlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", u, err)
		}
	}
}

// TestOpenUnreachable: a URL whose ensemble does not answer fails within
// its connect_timeout, instead of returning a client that hangs.
func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	c, err := distlock.Open(ctxFor(t, 10*time.Second), "zk://"+addr+"?connect_timeout=500ms")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of an unreachable ensemble succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Open failed after %v; want about its connect_timeout of 500ms", d)
	}
}

// TestNewInvalid: a backend given an invalid argument or option, a nil
// one and a closed one fail every method at once with an error wrapping
// ErrInvalidBackend that names what is wrong; an invalid option is never
// ignored or kept to fail later.
func TestNewInvalid(t *testing.T) {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := zklock.New(conn, time.Second)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	req := driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}
	for _, c := range []struct {
		name, says string
		b          *zklock.Backend
	}{
		{"nil conn", "nil *zk.Conn", zklock.New(nil, time.Second)},
		{"nil backend", "nil *Backend", nil},
		{"closed backend", "closed", closed},
		{"relative root", `WithRoot("locks")`, zklock.New(conn, time.Second, zklock.WithRoot("locks"))},
		{"root with ..", "..", zklock.New(conn, time.Second, zklock.WithRoot("/a/../b"))},
		{"reserved root", "/zookeeper", zklock.New(conn, time.Second, zklock.WithRoot("/zookeeper/x"))},
		{"control in root", "U+0001", zklock.New(conn, time.Second, zklock.WithRoot("/lo\x01cks"))},
		{"emoji in root", "U+1F512", zklock.New(conn, time.Second, zklock.WithRoot("/lo\U0001F512cks"))},
		{"bad UTF-8 in root", "U+FFFD", zklock.New(conn, time.Second, zklock.WithRoot("/lo\xffcks"))},
		{"non-positive session timeout", "session timeout 0s", zklock.New(conn, 0)},
		{"non-positive maximum session", "WithMaxSessionTimeout(0s)", zklock.New(conn, time.Second, zklock.WithMaxSessionTimeout(0))},
		{"nil drift", "WithDrift(nil)", zklock.New(conn, time.Second, zklock.WithDrift(nil))},
		{"nil option", "nil Option", zklock.New(conn, time.Second, nil)},
		{"first invalid option", "WithDrift(nil)", zklock.New(conn, time.Second, zklock.WithDrift(nil), zklock.WithRoot("x"))},
	} {
		check := func(method string, err error) {
			t.Helper()
			if !errors.Is(err, distlock.ErrInvalidBackend) || !strings.HasPrefix(err.Error(), "zklock: ") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s: %s: %v; want a zklock error wrapping ErrInvalidBackend that says %q", c.name, method, err, c.says)
			}
		}
		_, err := c.b.Acquire(ctx, req)
		check("Acquire", err)
		check("Release", c.b.Release(ctx, req.Lease))
		_, err = c.b.Refresh(ctx, req.Lease, time.Second)
		check("Refresh", err)
		_, err = c.b.Inspect(ctx, "k")
		check("Inspect", err)
		_, err = c.b.List(ctx, "")
		check("List", err)
		_, err = c.b.Break(ctx, "k")
		check("Break", err)
		w, err := c.b.Watch(ctx, "k", "")
		if w != nil {
			_ = w.Close()
		}
		check("Watch", err)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := distlock.New(c.b).Mutex("k").Lock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) || ctx.Err() != nil {
			t.Errorf("%s: Lock: %v (ctx: %v); want ErrInvalidBackend at once", c.name, err, ctx.Err())
		}
		cancel()
	}
}

// TestInvalidRequest: a request that breaks the contract fails at once,
// before the session is opened (there is no ensemble here to answer),
// with a zklock error wrapping the contract's error for it. (Which
// requests break it, for every backend, is distlocktest's InvalidRequest.)
func TestInvalidRequest(t *testing.T) {
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := zklock.New(conn, 10*time.Second)
	defer b.Close()
	ctx := ctxFor(t, 5*time.Second)
	_, aerr := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}})
	_, ferr := b.Refresh(ctx, driver.Lease{Key: "k"}, time.Second)
	_, ierr := b.Inspect(ctx, "")
	_, berr := b.Break(ctx, "")
	w, werr := b.Watch(ctx, "", "o")
	if w != nil {
		_ = w.Close()
	}
	for _, c := range []struct {
		call string
		err  error
		want error
	}{
		{"Acquire with a zero TTL", aerr, driver.ErrInvalidRequest},
		{"Release with an empty key", b.Release(ctx, driver.Lease{Owner: "o"}), driver.ErrInvalidKey},
		{"Refresh with an empty owner", ferr, driver.ErrInvalidRequest},
		{"Inspect of an empty key", ierr, driver.ErrInvalidKey},
		{"Break of an empty key", berr, driver.ErrInvalidKey},
		{"Watch of an empty key", werr, driver.ErrInvalidKey},
	} {
		if !errors.Is(c.err, c.want) || !strings.HasPrefix(c.err.Error(), "zklock: ") {
			t.Errorf("%s: %v; want a zklock error wrapping %q", c.call, c.err, c.want)
		}
	}
}

// TestCloseEndsOwnSession: closing a client opened from a URL closes the
// connection it made, which ends the session and with it every node the
// session made. A lock held through it is gone at once, and its holder
// must be told so, not left to believe it holds the lock until its
// deadline while another client takes it.
func TestCloseEndsOwnSession(t *testing.T) {
	t.Parallel()
	srv := testserver.StartZooKeeper(t)
	ctx := ctxFor(t, 20*time.Second)
	c, err := distlock.Open(ctx, "zk://"+srv.Addr(), distlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	l, err := c.Mutex("closing").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock's handle still reports it held 5s after its session was closed")
	}
	other := distlock.New(newBackend(t, []string{srv.Addr()}, sessionTimeout))
	if _, err := other.Mutex("closing").TryLock(ctx); err != nil {
		t.Errorf("TryLock by another client after the holder's session closed: %v; want the lock free", err)
	}
}

// testKeyBytes: every byte may appear in a key, since a key's node name
// escapes what ZooKeeper refuses in a path.
func testKeyBytes(t *testing.T, addrs []string) {
	b := newBackend(t, addrs, sessionTimeout)
	ctx := ctxFor(t, 20*time.Second)
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, key := range []string{string(all), "\U0001F512", ".", "..", "zookeeper", "a/b", strings.Repeat("\x01", driver.MaxKeyLen)} {
		req := driver.Request{Lease: driver.Lease{Key: key, Owner: "o"}, TTL: 10 * time.Second}
		if g, err := b.Acquire(ctx, req); err != nil || !g.Acquired {
			t.Errorf("Acquire(%.20q): %+v, %v", key, g, err)
			continue
		}
		if err := b.Release(ctx, req.Lease); err != nil {
			t.Errorf("Release(%.20q): %v", key, err)
		}
	}
}
