package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 1)
	ctx := timeout(t, 20*time.Second)
	cl, err := distlock.Open(ctx, "etcd://"+strings.Join(c.Endpoints(), ",")+"?prefix=app/&dial_timeout=3s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer cl.Close()
	l, err := cl.Mutex("k").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	resp, err := c.Client(t).Get(ctx, "app/lock/k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Errorf("keys under the URL's prefix: %v, %v; want the holding", resp, err)
	}
}

func TestOpenURLInvalid(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 10*time.Second)
	for _, u := range []string{
		"etcd://",
		"etcd://host-without-port",
		"etcd://a:1,,b:2",
		"etcd://127.0.0.1:",
		"etcd://127.0.0.1:2379,127.0.0.1:",
		"etcd://127.0.0.1:2379/path",
		"etcd://127.0.0.1:2379?dial_timeout=soon",
		"etcd://127.0.0.1:2379?dial_timeout=-1s",
		"etcd://127.0.0.1:2379?colour=blue",
	} {
		if cl, err := distlock.Open(ctx, u); !errors.Is(err, distlock.ErrInvalidURL) {
			if cl != nil {
				cl.Close()
			}
			t.Errorf("Open(%q): %v; want ErrInvalidURL", u, err)
		}
	}
}

func TestOpenURLUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx := timeout(t, 10*time.Second)
	start := time.Now()
	cl, err := distlock.Open(ctx, "etcd://"+addr+"?dial_timeout=500ms")
	if err == nil {
		cl.Close()
		t.Fatalf("Open of an address nobody listens on succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Open failed after %v; want about its dial timeout of 500ms", d)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the address", err)
	}
}

func TestNilClient(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 5*time.Second)
	b := etcdlock.New(nil)
	if _, err := b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("Acquire on a nil client: %v; want ErrInvalidBackend", err)
	}
	if _, err := distlock.New(b).Mutex("k").TryLock(ctx); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("TryLock on a nil client: %v; want ErrInvalidBackend", err)
	}
	var nb *etcdlock.Backend
	if err := nb.Release(ctx, driver.Lease{Key: "k", Owner: "o"}); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("Release on a nil *Backend: %v; want ErrInvalidBackend", err)
	}
	if _, err := nb.Inspect(ctx, "k"); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("Inspect on a nil *Backend: %v; want ErrInvalidBackend", err)
	}
}
