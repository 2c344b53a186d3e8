package testserver

import (
	"testing"
)

// FreshMarker is the key by which distlock's restart guard knows a server
// life that follows no loss of data, under the default prefix "distlock:"
// on a server outside a cluster (package redisnode names it). Its value is
// the server's run id.
//
// StartRedis and StartSentinel write it into database 0 of each server
// they start, as redislock's DeclareFresh would: they know the server is
// new. Restart does not, so a server restarted without its data looks to
// the guard like one that lost it, as it should; nor does a server started
// with [AsRestarted].
const FreshMarker = "distlock:guard"

// AsRestarted starts a server without [FreshMarker], so that the restart
// guard treats it as a server that may have lost its data.
func AsRestarted() Option {
	return func(c *config) { c.unmarked = true }
}

// markFresh writes FreshMarker on r, unless the test asked otherwise.
func (r *Redis) markFresh(tb testing.TB) {
	tb.Helper()
	if r.cfg.unmarked {
		return
	}
	info, err := Do(r.Addr(), doTimeout, "INFO", "server")
	if err == nil {
		_, err = Do(r.Addr(), doTimeout, "SET", FreshMarker, infoField(info, "run_id"))
	}
	if err != nil {
		tb.Fatalf("testserver: marking %s fresh: %v", r.Addr(), err)
	}
}
