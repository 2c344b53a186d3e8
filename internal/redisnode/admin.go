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

// Break ends every holding of k, whoever holds it, and wakes its waiters,
// in one round trip. It reports whether anything was held.
func Break(ctx context.Context, c redis.Scripter, k Keys) (bool, error) {
	n, err := run(ctx, c, breakScript, k.of(breakScript), k.channel).Int64()
	return n > 0, err
}

// Names returns, sorted, the names of the locks under prefix whose names
// begin with name and that have a holding key (a lock, readers or permits)
// on c. On a Cluster it scans every master. The names are candidates: a
// holding may have lapsed since, so callers inspect each.
func Names(ctx context.Context, c redis.UniversalClient, prefix, name string) ([]string, error) {
	found := make(map[string]struct{})
	err := scanKeys(ctx, c, prefix, func(key string) {
		if n, ok := nameOf(prefix, key, holdingSuffixes); ok && strings.HasPrefix(n, name) {
			found[n] = struct{}{}
		}
	})
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

// Stored returns, sorted, every key under prefix on c (every master's, on
// a Cluster) that belongs to a lock whose name begins with name: its lock,
// counter, queue, receipts and the rest of what keysFor names. A lock
// nobody holds or waits for leaves none behind for long.
func Stored(ctx context.Context, c redis.UniversalClient, prefix, name string) ([]string, error) {
	var keys []string
	err := scanKeys(ctx, c, prefix, func(key string) {
		if n, ok := nameOf(prefix, key, allSuffixes); ok && strings.HasPrefix(n, name) {
			keys = append(keys, key)
		}
	})
	slices.Sort(keys)
	return keys, err
}

// scanKeys calls found, one call at a time, with each key under prefix
// that has a hash tag, on c or on every master of a Cluster.
func scanKeys(ctx context.Context, c redis.UniversalClient, prefix string, found func(key string)) error {
	var mu sync.Mutex // ForEachMaster scans the masters at once
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, globEscape(prefix)+"{*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			found(iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	}
	return scan(ctx, c)
}

// holdingSuffixes are the endings of the keys that hold a lock (see
// keysFor): the lock itself (no suffix), its readers and its permits.
var holdingSuffixes = []string{"", ":readers", ":permits"}

// allSuffixes are the endings of every key of a lock (see keysFor).
var allSuffixes = []string{"", ":fence", ":queue", ":places", ":readers", ":rtokens", ":writing",
	":receipts", ":rreceipts", ":holds", ":hreceipts", ":permits", ":tokens"}

// nameOf returns the lock name of key, a key under prefix, if key is one of
// a lock's keys that end in one of suffixes.
func nameOf(prefix, key string, suffixes []string) (string, bool) {
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
		for _, suffix := range suffixes {
			if n, ok := strings.CutSuffix(body, suffix); ok && strings.ContainsAny(n, "{}") && nameHash(n) == hash {
				return n, true
			}
		}
		return "", false
	}
	n, after, ok := strings.Cut(rest[1:], "}")
	if !ok || !slices.Contains(suffixes, after) {
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
