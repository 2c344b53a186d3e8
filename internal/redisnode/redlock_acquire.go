package redisnode

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
)

// AcquireRedlock is [Acquire] for a Redlock master, whose keys come from a
// [KeyCache] with a coarse token grain: a grant of a free lock writes the
// fencing counter only when its lease might end before the clock floor
// passes its token (see redlock_acquire.lua). A renewal of such a lease
// must then never cut it below [RedlockMinLease]. client is as for
// [AcquireAs]: an attempt at a Redlock key's gate node names the client
// whose notifier hears that node, so that a refusal enlists it and a
// release there wakes it alone ([ReleaseAs]); elsewhere it is "".
func AcquireRedlock(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc, client string) (token uint64, holderTTL time.Duration, err error) {
	buf := argvs.Get().(*[]any)
	keys, args := k.of(redlockAcquireScript), []any{boxOwner(owner), boxMillis(ttl), boxDesc(desc), k.grant, boxClient(client)}
	if client == "" {
		keys, args = keys[:len(keys)-redlockAcquireScript.optKeys], args[:len(args)-redlockAcquireScript.optArgs]
	}
	token, holderTTL, err = grantOf(runIn(ctx, c, redlockAcquireScript, buf, keys, args), k, driver.Exclusive, 0)
	clear(*buf)
	argvs.Put(buf)
	return token, holderTTL, err
}

// RedlockMinLease returns the shortest lease a renewal may leave on a node
// whose grants take tokens of grain g from [AcquireRedlock]: a lease that
// lasts that long after its grant outlives the clock floor's passing of
// its token, which it keeps in place of the counter.
func RedlockMinLease(g time.Duration) time.Duration {
	return g + 2*time.Millisecond
}
