package etcdtest

import (
	"context"
	"testing"
	"time"
)

// TestRestart: a cluster serves, survives the loss of a member, and a
// killed member rejoins with its data.
func TestRestart(t *testing.T) {
	c := StartCluster(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	leader := c.Leader(t)
	leader.Kill()
	// The first requests after the leader's death may time out until
	// the others have elected a new one.
	for {
		_, err := cli.Put(ctx, "k", "v2")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Put with the leader dead: %v", err)
		}
	}
	leader.Restart()
	one := Dial(t, leader.Addr())
	for {
		r, err := one.Get(ctx, "k")
		if err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "v2" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted member never served the latest value: %v, %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
