package redisnode

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// RefreshWait runs the refresh script and then WAIT n timeout on the same
// connection to the master of k (WAIT counts the writes of its own
// connection): held reports whether owner held the lock, acked how many
// replicas confirmed the extension.
func RefreshWait(ctx context.Context, c redis.UniversalClient, k Keys, owner string, ttl time.Duration, n int, timeout time.Duration) (held bool, acked int, err error) {
	var node redis.Cmdable = c
	if cc, ok := c.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, k.Lock)
		if err != nil {
			return false, 0, err
		}
		node = m
	}
	run := func() (*redis.Cmd, *redis.IntCmd) {
		pipe := node.Pipeline()
		ref := refreshScript.EvalSha(ctx, pipe, k.list(refreshScript), owner, ttl.Milliseconds())
		wait := WaitCmd(ctx, pipe, n, timeout)
		_, _ = pipe.Exec(ctx)
		return ref, wait
	}
	ref, wait := run()
	if IsNoScript(ref.Err()) {
		if err := refreshScript.Load(ctx, node).Err(); err != nil {
			return false, 0, err
		}
		ref, wait = run()
	}
	v, err := ref.Int64()
	if err != nil || v != 1 {
		return false, 0, err
	}
	got, err := wait.Result()
	return true, int(got), err
}

// WaitCmd queues WAIT n timeout. go-redis' own Wait stretches the read
// deadline by the timeout, so it is preferred where the pipeline has it.
func WaitCmd(ctx context.Context, pipe redis.Pipeliner, n int, timeout time.Duration) *redis.IntCmd {
	if w, ok := pipe.(interface {
		Wait(context.Context, int, time.Duration) *redis.IntCmd
	}); ok {
		return w.Wait(ctx, n, timeout)
	}
	cmd := redis.NewIntCmd(ctx, "wait", n, timeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}
