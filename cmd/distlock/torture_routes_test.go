package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
)

// TestSentinelClientRoutes: the worker's Sentinel client dials every
// address through its route, and refuses an address without one, which
// would escape the cut faults.
func TestSentinelClientRoutes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	// Port 1 is never the sentinel: only the route can reach the listener.
	rdb, opts, err := sentinelClient("redis+sentinel://127.0.0.1:1/m?replicas=1", map[string]string{"127.0.0.1:1": ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if len(opts) != 1 {
		t.Errorf("%d options, want 1 (replicas)", len(opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = rdb.Ping(ctx).Err() // fails: the listener is no sentinel
	select {
	case <-accepted:
	case <-ctx.Done():
		t.Fatal("the client did not dial through its route")
	}

	rdb2, _, err := sentinelClient("redis+sentinel://127.0.0.1:2/m", map[string]string{"127.0.0.1:1": ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb2.Close()
	if err := rdb2.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "no route") {
		t.Errorf("Ping through an unrouted address: %v, want a no-route error", err)
	}

	for _, raw := range []string{"redis://127.0.0.1:1/0", "redis+sentinel://127.0.0.1:1/m?bogus=1", "redis+sentinel://127.0.0.1:1/"} {
		if _, _, err := sentinelClient(raw, nil); !errors.Is(err, distlock.ErrInvalidURL) {
			t.Errorf("%s: %v, want ErrInvalidURL", raw, err)
		}
	}
}
