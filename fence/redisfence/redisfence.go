// Package redisfence stores values in Redis together with their fencing
// tokens, refusing a write whose token is lower than the stored one: the
// Redis helpers of package fence, kept apart so that programs fencing
// other resources do not build the Redis client.
//
// A value lives in one hash with the fields "value", "token" and "holder",
// written by one Lua script that compares the tokens and writes in one
// step. Any go-redis client serves, including a cluster client: there is
// no second key whose hash slot would have to match.
package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/fence"
)

var (
	//go:embed lua/set.lua
	setSrc string
	//go:embed lua/get.lua
	getSrc string

	// Run by EVALSHA; go-redis falls back to EVAL on NOSCRIPT.
	setScript = redis.NewScript(setSrc)
	getScript = redis.NewScript(getSrc)
)

// Set stores value at key together with token, in one Lua script, unless
// key already holds a higher token; then it leaves key unchanged and
// returns an error wrapping [fence.ErrStale] that names both tokens. An
// equal token is accepted.
//
// The key's TTL, if any, is kept. The fence holds only for writes that go
// through Set: a plain HSET or DEL on key bypasses it (and a DEL forgets
// the highest token). A key holding another type fails with Redis's
// WRONGTYPE error.
func Set(ctx context.Context, rdb redis.Scripter, key, value string, token uint64) error {
	return SetHolder(ctx, rdb, key, value, token, "")
}

// SetHolder is [Set] for a writer that names its holding, as
// [fence.Guard.DoHolder] does: the holder is stored in the field "holder",
// and a write with the stored token from another holder is refused with an
// error wrapping [fence.ErrTokenReused] and [fence.ErrStale]. An empty
// holder names nobody: it matches any, and keeps the stored one.
func SetHolder(ctx context.Context, rdb redis.Scripter, key, value string, token uint64, holder string) error {
	res, err := setScript.Run(ctx, rdb, []string{key}, value, strconv.FormatUint(token, 10), holder).Slice()
	if err != nil {
		return fmt.Errorf("redisfence: storing %q: %w", key, err)
	}
	if len(res) < 2 {
		return fmt.Errorf("redisfence: storing %q: unexpected reply %v", key, res)
	}
	outcome, _ := res[0].(int64)
	if outcome == 1 {
		return nil
	}
	s, _ := res[1].(string)
	stored, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("redisfence: storing %q: unexpected stored token %v", key, res[1])
	}
	if outcome == 2 && len(res) == 3 {
		first, _ := res[2].(string)
		return fmt.Errorf("%w (key %q)", fence.NewTokenReusedError(stored, first, holder), key)
	}
	return fmt.Errorf("%w (key %q)", fence.NewStaleError(token, stored), key)
}

// Get returns the value and token stored at key by [Set]. It returns
// redis.Nil (test it with errors.Is) if key does not exist or holds no
// token.
func Get(ctx context.Context, rdb redis.Scripter, key string) (value string, token uint64, err error) {
	res, err := getScript.Run(ctx, rdb, []string{key}).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("redisfence: reading %q: %w", key, err)
	}
	if len(res) != 2 {
		return "", 0, fmt.Errorf("redisfence: reading %q: unexpected reply %v", key, res)
	}
	if res[1] == nil {
		return "", 0, redis.Nil
	}
	s, _ := res[1].(string)
	token, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("redisfence: reading %q: malformed token %v", key, res[1])
	}
	value, _ = res[0].(string)
	return value, token, nil
}
