package locker

import (
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// newGoRedis returns a go-redis client with default pool settings. The
// maintenance-notification handshake, which a stock redis-server does not
// support, is turned off so that connecting is quiet and identical for
// every library built on go-redis.
func newGoRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// newLockClient returns a go-redis client as redislock's documentation
// asks a lock's client to be: calls that end with their context, and no
// retries inside go-redis (distlock retries itself). These settings change
// what a call does on a slow or broken network, not on loopback.
func newLockClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1,
		DialerRetries:            1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

func newGoRedisAll(addrs []string) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = newGoRedis(a)
	}
	return cs
}

func closeAll(cs []*redis.Client) error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
