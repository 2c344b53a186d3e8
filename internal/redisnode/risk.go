package redisnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// riskTTL is how long a RiskCache trusts what it read: configurations
// change rarely, and Inspect must not read them on every call.
const riskTTL = time.Minute

// RiskCache remembers what [Risks] found on a deployment, for a minute.
// The zero value is ready to use; it is safe for concurrent use.
type RiskCache struct {
	mu    sync.Mutex
	text  string
	until time.Time
}

// Get returns the warning line of [Risks] for the servers c reaches under a
// restart guard of maxTTL (0: none), read at most once a minute. It returns
// "" when the configuration cannot be read: the warning is advice, and
// Inspect does not fail for it.
func (rc *RiskCache) Get(ctx context.Context, c redis.UniversalClient, maxTTL time.Duration) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if time.Now().Before(rc.until) {
		return rc.text
	}
	text, err := Risks(ctx, c, maxTTL)
	if err != nil {
		return ""
	}
	rc.text, rc.until = text, time.Now().Add(riskTTL)
	return rc.text
}

// Risks reads the eviction policy and the persistence of the servers c
// reaches (every master of a Cluster) from INFO, which hosted services
// allow where they disable CONFIG, and describes in one line how they put
// locks and fencing counters at risk, or returns "" if they do not.
func Risks(ctx context.Context, c redis.UniversalClient, maxTTL time.Duration) (string, error) {
	var (
		mu    sync.Mutex
		parts []string
	)
	read := func(ctx context.Context, node redis.Cmdable) error {
		var mem, pers *redis.StringCmd
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			mem, pers = p.Info(ctx, "memory"), p.Info(ctx, "persistence")
			return nil
		})
		if err != nil {
			return err
		}
		found := risks(mem.Val(), pers.Val(), maxTTL)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range found {
			if !slices.Contains(parts, r) {
				parts = append(parts, r)
			}
		}
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return read(ctx, m) })
	} else {
		err = read(ctx, c)
	}
	if err != nil {
		return "", err
	}
	return strings.Join(parts, "; "), nil
}

// risks reads the INFO sections memory and persistence of one server.
func risks(memory, persistence string, maxTTL time.Duration) []string {
	var out []string
	policy := infoField(memory, "maxmemory_policy")
	if limit := infoField(memory, "maxmemory"); limit != "" && limit != "0" && policy != "" && policy != "noeviction" {
		what := "held locks"
		if strings.HasPrefix(policy, "allkeys-") {
			what = "held locks and fencing counters"
		}
		out = append(out, fmt.Sprintf("maxmemory-policy %s: when memory is full, Redis may evict %s and let a second holder in (tokens still increase, from the server clock); use noeviction", policy, what))
	}
	if infoField(persistence, "aof_enabled") == "0" {
		then := "a second holder can take a lock whose holder is still valid"
		if maxTTL > 0 {
			then = fmt.Sprintf("new locks wait until the server has run for %v (the restart guard)", maxTTL)
		}
		out = append(out, "no append-only file (appendonly no): a restart loses the locks held, and "+then)
	}
	return out
}

// infoField returns the value of key in an INFO reply, or "".
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":"); ok && k == key {
			return v
		}
	}
	return ""
}
