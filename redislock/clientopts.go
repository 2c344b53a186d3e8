package redislock

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clientSettings are the go-redis options that decide how long a lock's
// call can outlast its context.
type clientSettings struct {
	contextTimeout bool // ContextTimeoutEnabled
	maxRetries     int  // after the client's defaults: 0 means none
	dialerRetries  int  // after the client's defaults: 5 unless set
}

// settingsOf reads the settings of the clients whose options can be read:
// standalone (also Sentinel's failover client), Cluster and Ring.
func settingsOf(rdb redis.UniversalClient) (clientSettings, bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		return clientSettings{o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries}, true
	case *redis.ClusterClient:
		o := c.Options()
		return clientSettings{o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries}, true
	case *redis.Ring:
		o := c.Options()
		return clientSettings{o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries}, true
	}
	return clientSettings{}, false
}

// clientProblems says, one clause each, what rdb's options cost the
// locks: nothing unsafe, since every lease is counted from the start of
// the call that took or renewed it, but calls that return late.
func clientProblems(rdb redis.UniversalClient) []string {
	s, ok := settingsOf(rdb)
	if !ok {
		return nil
	}
	var p []string
	if !s.contextTimeout {
		p = append(p, "ContextTimeoutEnabled is off, so a call ignores its context's deadline and waits out the client's "+
			"ReadTimeout (3s by default) and retries: Lock, TryLock and Unlock can return seconds after their context ended")
	}
	if s.maxRetries > 0 {
		p = append(p, fmt.Sprintf("MaxRetries is %d, so go-redis repeats a command after a network error within one call, "+
			"hiding the failure from distlock and keeping the call past its deadline; a repeated write can reach the server "+
			"after the call gave up (distlock's writes are idempotent, and it retries them itself: set MaxRetries: -1)", s.maxRetries))
	}
	if s.dialerRetries > 1 {
		p = append(p, fmt.Sprintf("DialerRetries is %d, so a call to an unreachable server dials %d times, with backoff, "+
			"before it fails (set DialerRetries: 1)", s.dialerRetries, s.dialerRetries))
	}
	return p
}

// warnClientOptions logs, once per backend, what rdb's options cost the
// locks, with the options that avoid it.
func warnClientOptions(rdb redis.UniversalClient) {
	if p := clientProblems(rdb); len(p) > 0 {
		slog.Warn("redislock: the go-redis client is not set up for locks; use ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1 (see the redislock package doc): " +
			strings.Join(p, "; "))
	}
}
