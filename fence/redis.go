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
// and "token", so there is no hash slot to share.
//
// The key's TTL, if any, is kept. The fence holds only for writes that go
// through RedisSet: a plain HSET or DEL on key bypasses it (and a DEL
// forgets the highest token). A key holding another type fails with
// Redis's WRONGTYPE error.
func RedisSet(ctx context.Context, rdb redis.Scripter, key, value string, token uint64) error {
	res, err := setScript.Run(ctx, rdb, []string{key}, value, strconv.FormatUint(token, 10)).Slice()
	if err != nil {
		return fmt.Errorf("fence: storing %q: %w", key, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("fence: storing %q: unexpected reply %v", key, res)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	s, _ := res[1].(string)
	stored, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("fence: storing %q: unexpected stored token %v", key, res[1])
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
