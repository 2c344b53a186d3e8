package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// Inspect implements driver.Backend. The lock is held when a quorum of the
// masters that answered hold it for the same owner; TTL is then how long
// that quorum lasts (the quorum-th longest TTL among them), and Token the
// holder's. Otherwise Token is the largest counter seen. It fails if fewer
// than a quorum answered.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.checkKey(ctx, key); err != nil {
		return driver.Info{}, err
	}
	k := b.keys.Get(key)
	states := make([]redisnode.State, len(b.nodes))
	fo := b.fan(ctx, b.answerTimeout(), b.all, 0, func(ctx context.Context, i int, rdb redis.UniversalClient) reply {
		st, err := redisnode.Inspect(ctx, rdb, k)
		states[i] = st // read only after the reply is received
		return reply{node: i, ok: err == nil, err: err}
	})
	rs := make([]reply, len(b.nodes))
	answered := 0
	var info driver.Info
	owners := map[string][]int{}
	waiting := fo.collect(b.all, func(r reply) bool {
		rs[r.node] = r
		if r.ok {
			answered++
			st := states[r.node]
			info.Token = max(info.Token, st.Token)
			if st.Held {
				owners[st.Owner] = append(owners[st.Owner], r.node)
			}
		}
		return true
	})
	if answered < b.quorum {
		b.mark(rs, waiting, 0, fo.silence())
		return driver.Info{}, b.quorumError("inspect", key, rs)
	}
	for _, held := range owners {
		if len(held) < b.quorum {
			continue
		}
		ttls := make([]time.Duration, len(held))
		info.Token, info.Holds = 0, 0
		for j, i := range held {
			ttls[j] = states[i].TTL
			info.Token = max(info.Token, states[i].Token)
			info.Holds = max(info.Holds, states[i].Holds)
			if info.Meta == nil {
				info.Meta = states[i].Meta
			}
		}
		sortDesc(ttls)
		info.Held, info.TTL = true, ttls[b.quorum-1]
	}
	info.Warnings = b.warnings(ctx, k)
	return info, nil
}

func sortDesc(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] > d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
