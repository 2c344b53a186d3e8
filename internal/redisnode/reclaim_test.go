package redisnode_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
)

// counterState reads, at one instant, the server's clock (µs), the last
// token the records of k keep (the counter, and the lock key's lease or
// the free record its release left), and how much longer the longest-lived record that keeps it
// lasts.
func counterState(t *testing.T, rdb *redis.Client, k redisnode.Keys) (now, counter uint64, life time.Duration) {
	t.Helper()
	const read = "local t = redis.call('TIME') local out = {t[1] * 1000000 + t[2]} " +
		"for _, key in ipairs(KEYS) do table.insert(out, redis.call('GET', key) or '') table.insert(out, redis.call('PTTL', key)) end " +
		"return out"
	vals, err := rdb.Eval(context.Background(), read, []string{k.Fence, k.Lock}).Slice()
	if err != nil {
		t.Fatal(err)
	}
	life = -2 * time.Millisecond
	for i := range 2 {
		v, _ := vals[1+2*i].(string)
		// Which line holds the token: the counter's only one, a lease's
		// second, a free record's last.
		line := i
		if strings.HasPrefix(v, "\n") {
			line = -1
		}
		lines := strings.Split(v, "\n")
		if v == "" || (line > 0 && len(lines) <= line) {
			continue
		}
		n, err := strconv.ParseUint(lines[(line+len(lines))%len(lines)], 10, 64)
		if err != nil {
			continue
		}
		pttl := time.Duration(vals[2+2*i].(int64)) * time.Millisecond
		switch {
		case n > counter:
			counter, life = n, pttl
		case n == counter:
			life = max(life, pttl)
		}
	}
	return uint64(vals[0].(int64)), counter, life
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
			for rdb.Exists(ctx, k.Fence, k.Lock).Val() > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the records of the last token did not expire within 40s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			take()
		})
	}
}

// TestPermitAfterReleaseRefusesMutex: a mutex grant skips looking for
// readers and permits only while the free record shows none can have
// been granted since; a permit granted after the release is seen.
func TestPermitAfterReleaseRefusesMutex(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := newClient(t, srv.Addr())
	ctx := context.Background()
	k := redisnode.KeysFor("quiet:", t.Name())
	tok, _, err := redisnode.Acquire(ctx, rdb, k, "a", time.Minute, "")
	if err != nil || tok == 0 {
		t.Fatalf("Acquire: %d, %v", tok, err)
	}
	if ok, err := redisnode.Release(ctx, rdb, k, "a"); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	permit, _, err := redisnode.AcquirePermit(ctx, rdb, k, "p", time.Minute, 2)
	if err != nil || permit <= tok {
		t.Fatalf("AcquirePermit: %d, %v; want a token above %d", permit, err, tok)
	}
	got, _, err := redisnode.Acquire(ctx, rdb, k, "b", time.Minute, "")
	var kind *driver.KindError
	if !errors.As(err, &kind) || got != 0 {
		t.Fatalf("Acquire beside a live permit: token %d, %v; want a KindError", got, err)
	}
	if ok, err := redisnode.ReleasePermit(ctx, rdb, k, "p"); err != nil || !ok {
		t.Fatalf("ReleasePermit: %v, %v", ok, err)
	}
	if got, _, err := redisnode.Acquire(ctx, rdb, k, "b", time.Minute, ""); err != nil || got <= permit {
		t.Fatalf("Acquire after the permit's release: %d, %v; want a token above %d", got, err, permit)
	}
}
