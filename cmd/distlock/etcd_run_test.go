//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/distlock-go/distlock/internal/testserver"
)

// TestRunEtcd: three distlock processes running under one key on an
// etcd:// URL (a 3-member cluster) never overlap, each gets its turn, and
// each CMD is given the fencing token, increasing from one holder to the
// next.
func TestRunEtcd(t *testing.T) {
	t.Parallel()
	u := "etcd://" + strings.Join(testserver.StartEtcd(t, 3), ",")
	runUnderOneKey(t, u, 3)
}
