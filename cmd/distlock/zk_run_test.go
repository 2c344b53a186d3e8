//go:build unix

package main

import (
	"testing"

	"github.com/distlock-go/distlock/internal/testserver"
)

// TestRunZooKeeper: three distlock processes running under one key on a
// zk:// URL never overlap, each gets its turn, and each CMD is given the
// fencing token, increasing from one holder to the next.
func TestRunZooKeeper(t *testing.T) {
	t.Parallel()
	u := "zk://" + testserver.StartZooKeeper(t).Addr() + "/distlock-run?session_timeout=6s"
	runUnderOneKey(t, u, 3)
}
