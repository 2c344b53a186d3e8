package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// counters returns the fencing counter of key on every node.
func counters(t testing.TB, srvs []*testserver.Redis, key string) []uint64 {
	t.Helper()
	out := make([]uint64, len(srvs))
	for i, v := range onNodes(t, srvs, "GET", fenceKey(key)) {
		out[i], _ = strconv.ParseUint(v, 10, 64)
	}
	return out
}

// setCounters sets the fencing counter of key on each node to base plus
// the node's value, and returns base: a day ahead of the clock, so that
// the counters, not the clock floor, decide the next tokens.
func setCounters(t testing.TB, srvs []*testserver.Redis, key string, vals ...uint64) (base uint64) {
	t.Helper()
	base = uint64(time.Now().Add(24 * time.Hour).UnixMicro())
	for i, s := range srvs {
		if _, err := s.Do(t, "SET", fenceKey(key), strconv.FormatUint(base+vals[i], 10)); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// TestTokenIsMaxAndWrittenBack: the token is the largest of the granting
// nodes', and when they disagree it is written back before Acquire returns,
// so that the next acquisition needs no second round trip.
func TestTokenIsMaxAndWrittenBack(t *testing.T) {
	srvs := startNodes(t, 5)
	key := t.Name()
	base := setCounters(t, srvs, key, 1, 1, 40, 1, 7)
	c := distlock.New(newBackend(t, addrsOf(srvs)))
	ctx := context.Background()
	l, err := c.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != base+41 {
		t.Errorf("token base+%d; want base+41, the largest node's", l.Token()-base)
	}
	for i, n := range counters(t, srvs, key) {
		if n < base+41 {
			t.Errorf("node %d counter base+%d after Acquire; want the token base+41 written back", i, n-base)
		}
	}
	_ = l.Unlock(ctx)
	l, err = c.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() != base+42 {
		t.Errorf("next token base+%d; want base+42", l.Token()-base)
	}
	for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
		if f := splitLines(v); len(f) < 2 || f[1] != strconv.FormatUint(base+42, 10) {
			t.Errorf("node %d holds %q; want every node in step at base+42", i, v)
		}
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// TestTokensIncreaseAcrossQuorums: tokens strictly increase from holder to
// holder even when successive holders are granted by different quorums
// that share a single node. The first scenario is the one per-node counters
// get wrong; then random rounds cut random minorities off.
func TestTokensIncreaseAcrossQuorums(t *testing.T) {
	srvs := startNodes(t, 5)
	proxies := make([]*testserver.Proxy, len(srvs))
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		proxies[i] = testserver.StartProxy(t, s.Addr())
		addrs[i] = proxies[i].Addr()
	}
	key := t.Name()
	ctx := context.Background()
	var last uint64
	round := func(name string, cut ...int) {
		t.Helper()
		for _, i := range cut {
			proxies[i].Cut()
		}
		defer func() {
			for _, i := range cut {
				proxies[i].Restore()
			}
		}()
		// A new client each time, as a new process would be.
		l, err := distlock.New(newBackend(t, addrs)).Mutex(key).TryLock(ctx)
		if err != nil {
			t.Fatalf("%s (nodes %v cut): %v", name, cut, err)
		}
		if l.Token() <= last {
			t.Errorf("%s (nodes %v cut): token %d, not above the previous holder's %d", name, cut, l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", name, err)
		}
	}

	// Node 0 is ahead. The first holder gets {0,1,2}: token 11, only node 0
	// had it, so it is written back to 1 and 2. The second gets {2,3,4},
	// which meet the first quorum in node 2 alone: 2 must know 11.
	setCounters(t, srvs, key, 10, 1, 1, 1, 1)
	round("first", 3, 4)
	round("second", 0, 1)

	rng := rand.New(rand.NewPCG(1, 2))
	for r := range 30 {
		round("round "+strconv.Itoa(r), rng.Perm(5)[:rng.IntN(3)]...)
	}
}

// failNth fails the nth script call (1-based) of its client, before it is
// sent.
type failNth struct {
	n, calls atomic.Int32
}

func (*failNth) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*failNth) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failNth) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && h.calls.Add(1) == h.n.Load() {
			err := errors.New("injected failure")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestFenceNotConfirmed: when the granting nodes disagree, the token must
// be confirmed by a quorum of the nodes that granted the lock. A node that
// refused cannot vouch for it (see the package documentation), so its
// confirmation does not count: with one of two granting nodes failing the
// write-back, the acquisition fails and is undone.
func TestFenceNotConfirmed(t *testing.T) {
	srvs := startNodes(t, 3)
	key := t.Name()
	setCounters(t, srvs, key, 9, 1, 1)
	// Node 2 is held by another owner: it refuses.
	if _, err := srvs[2].Do(t, "SET", lockKey(key), "other\n1\n0\n", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	clients := newClients(t, addrsOf(srvs))
	for _, c := range clients { // so that each operation is one EVALSHA
		if err := redisnode.LoadScripts(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	h := &failNth{} // node 1: the acquire goes through, the write-back fails
	h.n.Store(2)
	clients[1].AddHook(h)
	b := redlock.New(clients)
	t.Cleanup(func() { b.Close() })
	g, err := b.Acquire(context.Background(), driver.Request{Lease: driver.Lease{Key: key, Owner: "o"}, TTL: time.Minute})
	var qe *redlock.QuorumError
	if g.Acquired || !errors.As(err, &qe) || qe.Op != "fence" {
		t.Fatalf("Acquire: %+v, %v; want a fence *QuorumError", g, err)
	}
	t.Logf("error: %v", err)
	for i, v := range onNodes(t, srvs, "GET", lockKey(key)) {
		if strings.HasPrefix(v, "o\n") {
			t.Errorf("node %d kept the lock of an acquisition whose token was not confirmed", i)
		}
	}
}
