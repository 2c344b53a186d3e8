package redisnode

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
)

// Guard says how a node's scripts keep fencing tokens and leases safe when
// the node loses data.
type Guard struct {
	// MaxTTL is the restart guard's maximum lease length: a key with no
	// fencing counter is granted only once the server has run for MaxTTL,
	// or after [DeclareFresh]. Zero turns the restart guard off.
	MaxTTL time.Duration

	// Grain rounds the server clock down before it serves as a floor for
	// tokens (at least 1µs). Redlock rounds to 100ms so that its nodes
	// usually issue the same token and need no second round trip.
	Grain time.Duration

	// Cluster keeps one guard marker per hash slot, so that each lies in
	// the slot of the keys its scripts touch; otherwise there is one
	// marker per prefix.
	Cluster bool

	// Durable says that the servers put every write on disk before they
	// answer it (appendonly yes, appendfsync always) and never start from
	// an older copy of their data. The restart guard then lets new keys
	// through at once on a server that loaded back a marker of an earlier
	// life from its append-only file; a server without one (brand-new, or
	// restarted without its files) still waits or needs [DeclareFresh].
	Durable bool

	// NoClock turns the clock floor off: tokens then follow the counter
	// alone and go back to 1 when a node loses it. Only for showing what
	// the floor prevents (see distlock torture).
	NoClock bool
}

// boxed returns the guard's script argument, "grain:maxttl" or
// "grain:maxttl:1" when durable (µs, ms; see token.lua), boxed once for the
// hot path.
func (g Guard) boxed() any {
	grain := max(g.Grain.Microseconds(), 1)
	if g.NoClock {
		grain = 0
	}
	return strconv.FormatInt(grain, 10) + ":" + g.waitArg()
}

// waitArg returns the guard's argument to guard_wait.lua: "maxttl" (ms),
// or "maxttl:1" when durable.
func (g Guard) waitArg() string {
	s := strconv.FormatInt(max(g.MaxTTL.Milliseconds(), 0), 10)
	if g.Durable {
		s += ":1"
	}
	return s
}

var noGuard = Guard{}.boxed()

// markerName returns the name of the guard marker for the lock whose key
// is lock: one per prefix, or one per hash slot on Cluster.
func markerName(prefix, lock string, cluster bool) string {
	if !cluster {
		return prefix + "guard"
	}
	return prefix + "{" + slotTag(slotOf(lock)) + "}:guard"
}

// DeclareFresh marks the current life of the server c reaches (every
// master, for a Cluster client) as one that follows no loss of data, so
// that the restart guard lets new keys under prefix through at once. It is
// safe only when no lease granted before the servers' last start can still
// be alive: a brand-new server, one that kept all its data, or one that has
// been empty for a maximum lease length.
func DeclareFresh(ctx context.Context, c redis.UniversalClient, prefix string, cluster bool) error {
	if !cluster {
		return run(ctx, c, declareFresh, []any{markerName(prefix, "", false)}).Err()
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return run(ctx, c, declareFresh, []any{markerName(prefix, "", false)}).Err()
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return declareFresh.Load(ctx, m).Err()
	}); err != nil {
		return err
	}
	pipe := cc.Pipeline()
	for s := range slots {
		declareFresh.EvalSha(ctx, pipe, []string{prefix + "{" + slotTag(s) + "}:guard"})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// GuardWait returns how much longer the restart guard g holds back new
// grants of k (0: it does not).
func GuardWait(ctx context.Context, c redis.Scripter, k Keys, g Guard) (time.Duration, error) {
	if g.MaxTTL <= 0 {
		return 0, nil
	}
	ms, err := run(ctx, c, guardWait, k.of(guardWait), g.waitArg()).Int64()
	return time.Duration(ms) * time.Millisecond, err
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// slotOf returns the hash slot of key, by Redis Cluster's rule: the CRC16
// of the hash tag (what lies between the first "{" and the next "}", if
// not empty), or of the whole key.
func slotOf(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021), the checksum of key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	tagsOnce sync.Once
	tags     []string
)

// slotTag returns a short hash tag that falls in slot s.
func slotTag(s int) string {
	tagsOnce.Do(func() {
		tags = make([]string, slots)
		for n, left := uint64(0), slots; left > 0; n++ {
			t := strconv.FormatUint(n, 36)
			if s := crc16(t) % slots; tags[s] == "" {
				tags[s] = t
				left--
			}
		}
	})
	return tags[s]
}

// DefaultMaxTTL is the restart guard's maximum lease length unless the
// backend is told otherwise.
const DefaultMaxTTL = time.Minute

// CheckTTL returns an error, named for pkg, if ttl is above the maximum
// lease length max (one wrapping a [*driver.TTLTooLongError], so package
// distlock reports [driver.ErrTTLTooLong] at once), or if max is not
// positive (one wrapping [driver.ErrInvalidBackend]).
func CheckTTL(pkg string, ttl, max time.Duration) error {
	switch {
	case max <= 0:
		return fmt.Errorf("%s: WithMaxTTL(%v): want a positive maximum lease length: %w", pkg, max, driver.ErrInvalidBackend)
	case ttl > max:
		return fmt.Errorf("%s: %w", pkg, &driver.TTLTooLongError{TTL: ttl, Max: max,
			Why: "which the restart guard waits out after a server lost its data; raise it on every client of these servers (WithMaxTTL, or max_ttl in a URL)"})
	}
	return nil
}

// ClockQuery reads the URL option clock_tokens (on or off) and removes it
// from q: off turns the clock floor of fencing tokens off (Guard.NoClock).
func ClockQuery(q url.Values) (off bool, err error) {
	if !q.Has("clock_tokens") {
		return false, nil
	}
	switch v := q.Get("clock_tokens"); v {
	case "on":
	case "off":
		off = true
	default:
		return false, fmt.Errorf("clock_tokens %q: want on or off", v)
	}
	q.Del("clock_tokens")
	return off, nil
}

// GuardWarning is the line Inspect shows while the restart guard holds new
// grants back for wait more.
func GuardWarning(wait, maxTTL time.Duration) string {
	return fmt.Sprintf("restart guard: the server started less than %v ago without a declaration that it lost no data (DeclareFresh, or restart_guard=durable for servers that persist every write); new locks are granted in %v",
		maxTTL, wait.Round(time.Second))
}

// GuardQuery reads the restart guard's URL options and removes them from
// q: max_ttl (a Go duration, such as 90s) and restart_guard (on, off, or
// durable: see [Guard.Durable]). maxTTL is 0 when not given.
func GuardQuery(q url.Values) (maxTTL time.Duration, off, durable bool, err error) {
	if q.Has("max_ttl") {
		v := q.Get("max_ttl")
		if maxTTL, err = time.ParseDuration(v); err != nil || maxTTL <= 0 {
			return 0, false, false, fmt.Errorf("max_ttl %q: want a positive duration such as 90s", v)
		}
		q.Del("max_ttl")
	}
	if q.Has("restart_guard") {
		switch v := q.Get("restart_guard"); v {
		case "on":
		case "off":
			off = true
		case "durable":
			durable = true
		default:
			return 0, false, false, fmt.Errorf("restart_guard %q: want on, off or durable", v)
		}
		q.Del("restart_guard")
	}
	return maxTTL, off, durable, nil
}

// noInfo begins the error of a script whose restart guard may not read
// INFO server (NO_INFO in token.lua), which an ACL can forbid.
const noInfo = "distlock: the restart guard cannot read INFO server"

// BlindGuard reports whether err is a script's failure to read INFO server
// for the restart guard: the user's ACL forbids it. Every attempt on a key
// the node does not know fails so until the user may run INFO (+info) or
// the guard is turned off; the failed attempt changed nothing.
func BlindGuard(err error) bool {
	return err != nil && strings.Contains(err.Error(), noInfo)
}

// CheckPrefix returns an error if keys under prefix would not keep a
// lock's keys and its guard marker in one Redis Cluster hash slot: a "{"
// in prefix not closed within it by a "}" after at least one byte would
// make the hash tag run into the lock's name, or, empty, be ignored. A
// prefix with a whole tag of its own puts every lock in that tag's slot.
func CheckPrefix(prefix string) error {
	i := strings.IndexByte(prefix, '{')
	if i < 0 {
		return nil
	}
	if j := strings.IndexByte(prefix[i+1:], '}'); j > 0 {
		return nil
	}
	return fmt.Errorf("prefix %q has a %q that would move the Redis Cluster hash tag of every key under it, spreading a lock's keys over slots; close the tag within the prefix (%q) or leave braces out", prefix, "{", "{app}:")
}
