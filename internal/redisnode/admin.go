package redisnode

import (
	"context"
	_ "embed"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/break.lua
var breakSrc string

var breakScript = newScript(queueLib + breakSrc)

// Break ends every holding of k, whoever holds it, and wakes its waiters,
// in one round trip. It reports whether anything was held.
func Break(ctx context.Context, c redis.Scripter, k Keys) (bool, error) {
	keys := []string{k.Lock, k.Holds, k.Readers, k.RTokens, k.Permits, k.Tokens, k.Queue, k.Places}
	n, err := breakScript.Run(ctx, c, keys, k.Channel).Int64()
	return n > 0, err
}

// Names returns, sorted, the names of the locks under prefix whose names
// begin with name and that have a holding key (a lock, readers or permits)
// on c. On a Cluster it scans every master. The names are candidates: a
// holding may have lapsed since, so callers inspect each.
func Names(ctx context.Context, c redis.UniversalClient, prefix, name string) ([]string, error) {
	found := make(map[string]struct{})
	var mu sync.Mutex // ForEachMaster scans the masters at once
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, globEscape(prefix)+"{*", 1000).Iterator()
		for iter.Next(ctx) {
			if n, ok := nameOf(prefix, iter.Val()); ok && strings.HasPrefix(n, name) {
				mu.Lock()
				found[n] = struct{}{}
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// holdingSuffixes are the endings of the keys that hold a lock (see
// keysFor): the lock itself (no suffix), its readers and its permits.
var holdingSuffixes = []string{"", ":readers", ":permits"}

// nameOf returns the lock name of key, a key under prefix, if key is one of
// the keys that hold a lock.
func nameOf(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || !strings.HasPrefix(rest, "{") {
		return "", false
	}
	if tag, ok := strings.CutPrefix(rest, "{#"); ok {
		// A name with braces of its own, tagged by its hash: the suffix
		// that gives a name with that hash is the right one.
		hash, body, ok := strings.Cut(tag, "}")
		if !ok {
			return "", false
		}
		for _, suffix := range holdingSuffixes {
			if n, ok := strings.CutSuffix(body, suffix); ok && strings.ContainsAny(n, "{}") && nameHash(n) == hash {
				return n, true
			}
		}
		return "", false
	}
	n, after, ok := strings.Cut(rest[1:], "}")
	if !ok || !slices.Contains(holdingSuffixes, after) {
		return "", false
	}
	return n, true
}

// nameHash is the hash tag of a name with braces (see keysFor).
func nameHash(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return strconv.FormatUint(h.Sum64(), 36)
}

// globEscape quotes the characters that SCAN's MATCH pattern treats
// specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
