package fence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
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

// RedisSet stores value at key together with token, in one Lua script,
// unless key already holds a higher token; then it leaves key unchanged and
// returns an error wrapping [ErrStale] that names both tokens. An equal
// token is accepted. rdb can be any go-redis client, including a cluster
// client: everything lives in the one key, a hash with the fields "value"
// and "token" (and "holder", see [RedisSetHolder]), so there is no hash
// slot to share.
//
// The key's TTL, if any, is kept. The fence holds only for writes that go
// through RedisSet: a plain HSET or DEL on key bypasses it (and a DEL
// forgets the highest token). A key holding another type fails with
// Redis's WRONGTYPE error.
func RedisSet(ctx context.Context, rdb redis.Scripter, key, value string, token uint64) error {
	return RedisSetHolder(ctx, rdb, key, value, token, "")
}

// RedisSetHolder is [RedisSet] for a writer that names its holding, as
// [Guard.DoHolder] does: the holder is stored in the field "holder", and a
// write with the stored token from another holder is refused with an error
// wrapping [ErrTokenReused] and [ErrStale]. An empty holder names nobody:
// it matches any, and keeps the stored one.
func RedisSetHolder(ctx context.Context, rdb redis.Scripter, key, value string, token uint64, holder string) error {
	res, err := setScript.Run(ctx, rdb, []string{key}, value, strconv.FormatUint(token, 10), holder).Slice()
	if err != nil {
		return fmt.Errorf("fence: storing %q: %w", key, err)
	}
	if len(res) < 2 {
		return fmt.Errorf("fence: storing %q: unexpected reply %v", key, res)
	}
	outcome, _ := res[0].(int64)
	if outcome == 1 {
		return nil
	}
	s, _ := res[1].(string)
	stored, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("fence: storing %q: unexpected stored token %v", key, res[1])
	}
	if outcome == 2 && len(res) == 3 {
		first, _ := res[2].(string)
		return fmt.Errorf("%w (key %q)", reusedError(stored, first, holder), key)
	}
	return fmt.Errorf("%w (key %q)", staleError(token, stored), key)
}

// RedisGet returns the value and token stored at key by [RedisSet]. It
// returns redis.Nil (test it with errors.Is) if key does not exist or holds
// no token.
func RedisGet(ctx context.Context, rdb redis.Scripter, key string) (value string, token uint64, err error) {
	res, err := getScript.Run(ctx, rdb, []string{key}).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("fence: reading %q: %w", key, err)
	}
	if len(res) != 2 {
		return "", 0, fmt.Errorf("fence: reading %q: unexpected reply %v", key, res)
	}
	if res[1] == nil {
		return "", 0, redis.Nil
	}
	s, _ := res[1].(string)
	token, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("fence: reading %q: malformed token %v", key, res[1])
	}
	value, _ = res[0].(string)
	return value, token, nil
}
