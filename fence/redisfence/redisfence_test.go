package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/fence"
	"github.com/distlock-go/distlock/fence/internal/holdertest"
	"github.com/distlock-go/distlock/fence/redisfence"
	"github.com/distlock-go/distlock/internal/testserver"
)

func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	t.Parallel()
	srv := testserver.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestSet(t *testing.T) {
	rdb := newRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type step struct {
		value string
		token uint64
		stale bool
	}
	tests := []struct {
		name  string
		key   string
		steps []step
	}{
		{"higher accepted", "orders:1", []step{{"a", 1, false}, {"b", 2, false}, {"c", 9, false}}},
		{"equal accepted", "orders:2", []step{{"a", 3, false}, {"b", 3, false}}},
		{"lower rejected", "orders:3", []step{{"a", 5, false}, {"b", 4, true}, {"c", 0, true}, {"d", 5, false}}},
		{"braces in key", "{orders}:4:{x}", []step{{"a", 2, false}, {"b", 1, true}, {"c", 3, false}}},
		{"token zero first", "orders:5", []step{{"a", 0, false}, {"b", 0, false}, {"c", 1, false}}},
		{"empty value", "orders:6", []step{{"", 1, false}, {"x", 0, true}}},
		// Tokens are compared exactly: these differ below Lua's 2^53
		// precision, and the digit counts differ.
		{"beyond 2^53", "orders:7", []step{{"a", 1<<60 + 1, false}, {"b", 1 << 60, true}, {"c", 1<<60 + 2, false}}},
		{"digit count", "orders:8", []step{{"a", 10, false}, {"b", 9, true}, {"c", 100, false}, {"d", 99, true}}},
		{"max uint64", "orders:9", []step{{"a", math.MaxUint64 - 1, false}, {"b", math.MaxUint64, false}, {"c", math.MaxUint64 - 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := redisfence.Get(ctx, rdb, tt.key); !errors.Is(err, redis.Nil) {
				t.Fatalf("Get before any write: %v, want redis.Nil", err)
			}
			var wantValue string
			var wantToken uint64
			for i, s := range tt.steps {
				err := redisfence.Set(ctx, rdb, tt.key, s.value, s.token)
				if s.stale {
					if !errors.Is(err, fence.ErrStale) {
						t.Fatalf("step %d: Set(%q, token %d) = %v, want ErrStale", i, s.value, s.token, err)
					}
					if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(s.token)) || !strings.Contains(msg, fmt.Sprint(wantToken)) {
						t.Errorf("step %d: error %q does not name token %d and stored %d", i, msg, s.token, wantToken)
					}
				} else {
					if err != nil {
						t.Fatalf("step %d: Set(%q, token %d) = %v", i, s.value, s.token, err)
					}
					wantValue, wantToken = s.value, s.token
				}
				v, tok, err := redisfence.Get(ctx, rdb, tt.key)
				if err != nil || v != wantValue || tok != wantToken {
					t.Fatalf("step %d: Get = %q, %d, %v; want %q, %d", i, v, tok, err, wantValue, wantToken)
				}
			}
		})
	}
}

func TestSetKeepsTTLAndSurvivesScriptFlush(t *testing.T) {
	rdb := newRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key = "ttl"
	if err := redisfence.Set(ctx, rdb, key, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Expire(ctx, key, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// After SCRIPT FLUSH, EVALSHA fails with NOSCRIPT and the helpers must
	// fall back to EVAL.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisfence.Set(ctx, rdb, key, "b", 2); err != nil {
		t.Fatalf("Set after SCRIPT FLUSH: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, tok, err := redisfence.Get(ctx, rdb, key); err != nil || v != "b" || tok != 2 {
		t.Fatalf("Get after SCRIPT FLUSH = %q, %d, %v; want b, 2", v, tok, err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("TTL after Set = %v, want the hour set before", ttl)
	}
}

func TestSetForeignKeys(t *testing.T) {
	rdb := newRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisfence.Set(ctx, rdb, "str", "v", 1); err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Set on a string key = %v, want WRONGTYPE", err)
	}
	if err := rdb.HSet(ctx, "bad", "token", "007").Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisfence.Set(ctx, rdb, "bad", "v", 1); err == nil || !strings.Contains(err.Error(), "malformed token") {
		t.Fatalf("Set over a malformed token = %v, want an error", err)
	}
	if v, _ := rdb.HGet(ctx, "bad", "token").Result(); v != "007" {
		t.Fatalf("malformed token overwritten with %q", v)
	}
}

func TestSetCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	t.Parallel()
	cl := testserver.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Keys on different nodes, one of them with a hash tag.
	for _, key := range []string{"a", "b", "c", "{user:1}:doc"} {
		if err := redisfence.Set(ctx, rdb, key, "new", 5); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if err := redisfence.Set(ctx, rdb, key, "old", 4); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%s: Set with a lower token = %v, want ErrStale", key, err)
		}
		if v, tok, err := redisfence.Get(ctx, rdb, key); err != nil || v != "new" || tok != 5 {
			t.Fatalf("%s: Get = %q, %d, %v; want new, 5", key, v, tok, err)
		}
	}
}

func TestSetHolder(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	for name, steps := range holdertest.Cases {
		key := "fenced:" + name
		for i, s := range steps {
			value := strings.Repeat("v", i+1)
			err := redisfence.SetHolder(ctx, rdb, key, value, s.Token, s.Holder)
			holdertest.Check(t, i, s, err)
			got, _, err := redisfence.Get(ctx, rdb, key)
			if err != nil {
				t.Fatal(err)
			}
			if (got == value) != (s.Want == nil) {
				t.Fatalf("%s, step %d: stored %q after a write of %q (want refused: %v)", name, i, got, value, s.Want != nil)
			}
		}
	}
}
