package redisnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// counterState reads, at one instant, the server's clock (µs), the
// fencing counter and its remaining life.
func counterState(t *testing.T, rdb *redis.Client, k redisnode.Keys) (now, counter uint64, life time.Duration) {
	t.Helper()
	const read = "local t = redis.call('TIME') " +
		"return {t[1] * 1000000 + t[2], redis.call('GET', KEYS[1]) or '0', redis.call('PTTL', KEYS[1])}"
	vals, err := rdb.Eval(context.Background(), read, []string{k.Fence}).Slice()
	if err != nil {
		t.Fatal(err)
	}
	var c uint64
	for _, ch := range vals[1].(string) {
		c = c*10 + uint64(ch-'0')
	}
	return uint64(vals[0].(int64)), c, time.Duration(vals[2].(int64)) * time.Millisecond
}

// checkLife fails t unless the counter of k expires, and not before the
// clock floor of grain has passed it: a token issued after it expired is
// then still above it.
func checkLife(t *testing.T, rdb *redis.Client, k redisnode.Keys, grain time.Duration) {
	t.Helper()
	now, counter, life := counterState(t, rdb, k)
	if life < 0 {
		t.Fatalf("counter %d has no expiry (PTTL %v); want it to expire once the floor has passed it", counter, life)
	}
	expiry := now + uint64(life.Microseconds())
	if passed := counter + uint64(grain.Microseconds()); expiry < passed {
		t.Errorf("counter %d expires at %d µs, before the %v floor has passed it (%d)", counter, expiry, grain, passed)
	}
	if most := max(20*time.Second, time.Duration(counter-now)*time.Microsecond+grain+time.Second); life > most {
		t.Errorf("counter %d (clock %d) lives %v more; want at most %v", counter, now, life, most)
	}
}

// TestCounterReclaimedTokensIncrease: a key's fencing counter expires
// once unused for a while, never before the clock floor has passed it, so
// the first token after it expired is still above every earlier one: with
// a µs floor, and with Redlock's 100ms floor, where the counter runs ahead
// of the floor when several grants fall in one 100ms (INCR) and when a
// higher token was written back to it (Seed).
func TestCounterReclaimedTokensIncrease(t *testing.T) {
	srv := testserver.StartRedis(t)
	for _, grain := range []time.Duration{time.Microsecond, 100 * time.Millisecond} {
		t.Run(grain.String(), func(t *testing.T) {
			t.Parallel()
			rdb := newClient(t, srv.Addr())
			ctx := context.Background()
			k := redisnode.NewKeyCache("reclaim:", redisnode.Guard{Grain: grain}).Get(t.Name())
			var last uint64
			take := func() uint64 {
				t.Helper()
				token, _, err := redisnode.Acquire(ctx, rdb, k, "owner", time.Minute, "")
				if err != nil || token == 0 {
					t.Fatalf("Acquire: token %d, %v", token, err)
				}
				if ok, err := redisnode.Release(ctx, rdb, k, "owner"); err != nil || !ok {
					t.Fatalf("Release: %v, %v", ok, err)
				}
				if token <= last {
					t.Fatalf("token %d after %d", token, last)
				}
				last = token
				return token
			}
			for range 20 {
				take()
				checkLife(t, rdb, k, grain)
			}
			// A token from a node whose clock is 12s ahead, written back.
			now, _, _ := counterState(t, rdb, k)
			ahead := now + uint64((12 * time.Second).Microseconds())
			if _, err := redisnode.Seed(ctx, rdb, k, ahead, ""); err != nil {
				t.Fatal(err)
			}
			last = ahead
			checkLife(t, rdb, k, grain)
			take() // and one more on top, by INCR with the coarse floor
			checkLife(t, rdb, k, grain)
			deadline := time.Now().Add(40 * time.Second)
			for rdb.Exists(ctx, k.Fence).Val() == 1 {
				if time.Now().After(deadline) {
					t.Fatal("the counter did not expire within 40s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			take()
		})
	}
}
