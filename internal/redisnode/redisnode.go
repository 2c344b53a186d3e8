// Package redisnode holds the lock operations on one Redis node — the Lua
// scripts, the key layout and the shared release subscription — used by
// both redislock (one deployment) and redlock (N independent masters).
package redisnode

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/refresh.lua
	refreshSrc string
	//go:embed lua/inspect.lua
	inspectSrc string
	//go:embed lua/seed.lua
	seedSrc string

	// Scripts run by SHA; go-redis falls back to EVAL on NOSCRIPT (after a
	// restart or SCRIPT FLUSH), which loads them again.
	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
	refreshScript = redis.NewScript(refreshSrc)
	inspectScript = redis.NewScript(inspectSrc)
	seedScript    = redis.NewScript(seedSrc)
)

// Keys are the Redis names of one lock. They share a hash slot, so the
// scripts work on Redis Cluster.
type Keys struct {
	Lock    string // holds "owner\nfence\nsince-ms\ndescription", with the lease as its TTL
	Fence   string // the fencing counter; never expires
	Channel string // published to on release
	list    []string
}

// KeysFor returns the keys of the lock named name under prefix. The name
// goes into a {hash tag}; a name with braces of its own, which would cut
// the tag short, is tagged by its hash instead.
func KeysFor(prefix, name string) Keys {
	var base string
	if strings.ContainsAny(name, "{}") {
		h := fnv.New64a()
		h.Write([]byte(name))
		base = prefix + "{#" + strconv.FormatUint(h.Sum64(), 36) + "}" + name
	} else {
		base = prefix + "{" + name + "}"
	}
	k := Keys{Lock: base, Fence: base + ":fence", Channel: base + ":released"}
	k.list = []string{k.Lock, k.Fence}
	return k
}

// Describe encodes holder metadata for the lock value: one "k=v" per line,
// keys sorted. Newlines in values are replaced so the layout holds.
func Describe(meta map[string]string) string {
	if len(meta) == 0 {
		return ""
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(clean(k))
		b.WriteByte('=')
		b.WriteString(clean(meta[k]))
	}
	return b.String()
}

func clean(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Acquire runs the acquire script. It returns the fencing token when
// granted, or 0 and the holder's remaining TTL when not.
func Acquire(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc string) (token uint64, holderTTL time.Duration, err error) {
	n, err := acquireScript.Run(ctx, c, k.list, owner, ttl.Milliseconds(), desc).Int64()
	if err != nil {
		return 0, 0, err
	}
	return Grant(n)
}

// AcquireCmd queues the acquire script on a pipeline; read it with Grant.
func AcquireCmd(ctx context.Context, p redis.Pipeliner, k Keys, owner string, ttl time.Duration, desc string) *redis.Cmd {
	return acquireScript.EvalSha(ctx, p, k.list, owner, ttl.Milliseconds(), desc)
}

// LoadScripts loads every script on c, so that pipelined EVALSHA finds them.
func LoadScripts(ctx context.Context, c redis.Scripter) error {
	for _, s := range []*redis.Script{acquireScript, releaseScript, refreshScript, inspectScript, seedScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Grant decodes the acquire script's reply.
func Grant(n int64) (token uint64, holderTTL time.Duration, err error) {
	if n > 0 {
		return uint64(n), 0, nil
	}
	return 0, time.Duration(-n) * time.Millisecond, nil
}

// Release runs the release script: it reports whether owner held the lock.
func Release(ctx context.Context, c redis.Scripter, k Keys, owner string) (bool, error) {
	n, err := releaseScript.Run(ctx, c, k.list[:1], owner, k.Channel).Int64()
	return n == 1, err
}

// Refresh runs the refresh script: it reports whether owner held the lock.
func Refresh(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration) (bool, error) {
	n, err := refreshScript.Run(ctx, c, k.list[:1], owner, ttl.Milliseconds()).Int64()
	return n == 1, err
}

// Seed raises the fencing counter to at least token and returns its value.
func Seed(ctx context.Context, c redis.Scripter, k Keys, token uint64) (uint64, error) {
	n, err := seedScript.Run(ctx, c, k.list[1:], strconv.FormatUint(token, 10)).Int64()
	return uint64(n), err
}

// State is the lock as one node sees it.
type State struct {
	Held  bool
	Owner string
	Token uint64 // the holder's, or the last one issued when free
	TTL   time.Duration
	Meta  map[string]string // includes "since" (server ms) when held
}

// Inspect reads the lock's state without changing it.
func Inspect(ctx context.Context, c redis.Scripter, k Keys) (State, error) {
	vals, err := inspectScript.Run(ctx, c, k.list).Slice()
	if err != nil {
		return State{}, err
	}
	if len(vals) != 3 {
		return State{}, fmt.Errorf("redisnode: inspect: unexpected reply %v", vals)
	}
	var st State
	if s, ok := vals[2].(string); ok {
		st.Token, _ = strconv.ParseUint(s, 10, 64)
	}
	v, ok := vals[0].(string)
	if !ok {
		return st, nil
	}
	st.Held = true
	if ms, ok := vals[1].(int64); ok && ms > 0 {
		st.TTL = time.Duration(ms) * time.Millisecond
	}
	lines := strings.Split(v, "\n")
	if len(lines) < 3 {
		return st, errors.New("redisnode: inspect: lock value is not distlock's")
	}
	st.Owner = lines[0]
	st.Token, _ = strconv.ParseUint(lines[1], 10, 64)
	st.Meta = map[string]string{"since": lines[2]}
	for _, kv := range lines[3:] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			st.Meta[k] = v
		}
	}
	return st, nil
}

// IsNoScript reports whether err is Redis' NOSCRIPT error.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
