package scenario

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observer reads the servers' command counters (INFO commandstats) over
// its own connections. Its own INFO calls are left out of every count.
type Observer struct {
	clients []*redis.Client
}

// NewObserver connects to addrs.
func NewObserver(addrs []string) *Observer {
	o := &Observer{}
	for _, a := range addrs {
		o.clients = append(o.clients, redis.NewClient(&redis.Options{Addr: a, PoolSize: 1}))
	}
	return o
}

var errNoServer = errors.New("scenario: no Redis server observed")

// Close closes the connections.
func (o *Observer) Close() {
	for _, c := range o.clients {
		c.Close()
	}
}

// RTT times one PING to the first server, excluded from no count: callers
// that ping while measuring subtract their pings themselves. An Observer
// of no server (a scenario not on Redis) has no round trip to time.
func (o *Observer) RTT(ctx context.Context) (time.Duration, error) {
	if len(o.clients) == 0 {
		return 0, errNoServer
	}
	t := time.Now()
	err := o.clients[0].Ping(ctx).Err()
	return time.Since(t), err
}

// Counts is calls per command name, summed over the observed servers.
// Commands run by Lua scripts are counted too, by the server, under their
// own names: a script that calls SET and INCR counts as evalsha, set, incr.
type Counts map[string]int64

// Snapshot returns the current counts, summed over the servers.
func (o *Observer) Snapshot(ctx context.Context) (Counts, error) {
	c := Counts{}
	for _, cl := range o.clients {
		info, err := cl.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %w", err)
		}
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			name = strings.TrimPrefix(name, "cmdstat_")
			if name == "info" {
				continue
			}
			for f := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
					}
					c[name] += n
				}
			}
		}
	}
	return c, nil
}

// Per returns (after - before) per unit, per command, leaving out commands
// whose count did not change.
func Per(before, after Counts, units int) map[string]float64 {
	out := map[string]float64{}
	if units <= 0 {
		return out
	}
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			out[name] = float64(d) / float64(units)
		}
	}
	return out
}

// Total sums a per-unit breakdown.
func Total(per map[string]float64) float64 {
	var t float64
	for _, v := range per {
		t += v
	}
	return t
}
