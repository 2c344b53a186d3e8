package testserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/internal/launch"
)

// clusterSlots is the number of hash slots in a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of masters without replicas. Each node's
// cluster bus listens on a separate free port, and the node timeout is 2 s,
// so a killed node is marked failed within a few seconds.
type Cluster struct {
	// Nodes are the masters; Nodes[i] serves the i-th of len(Nodes)
	// equal ranges of hash slots, in order.
	Nodes []*Redis
}

// StartCluster starts a cluster of masters nodes (at least 1), assigns the
// hash slots evenly and returns once every node reports cluster_state:ok
// and knows all the others. It needs Redis 7.0 or newer and skips (or
// fails, see [Require]) with an older server. opts apply to every node.
func StartCluster(tb testing.TB, masters int, opts ...Option) *Cluster {
	tb.Helper()
	if masters < 1 || masters > clusterSlots {
		tb.Fatalf("testserver: StartCluster with %d masters", masters)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	cfg.cluster = true
	c := &Cluster{}
	for i := range masters {
		n := startRedis(tb, cfg)
		if i == 0 {
			requireVersion(tb, n, 7)
		}
		c.Nodes = append(c.Nodes, n)
	}

	for i, n := range c.Nodes {
		// Distinct config epochs spare the nodes the collision-resolution
		// rounds they would otherwise go through, all starting at 0.
		n.mustDo(tb, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
		lo, hi := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		n.mustDo(tb, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for _, n := range c.Nodes[1:] {
		c.Nodes[0].mustDo(tb, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port()), strconv.Itoa(n.srv.BusPort()))
	}
	want := strconv.Itoa(masters)
	for _, n := range c.Nodes {
		waitFor(tb, setupTimeout, "cluster node "+n.Addr()+" to converge", func() error {
			info, err := n.Do(tb, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			state, known := infoField(info, "cluster_state"), infoField(info, "cluster_known_nodes")
			if state != "ok" || known != want {
				return fmt.Errorf("cluster_state:%s cluster_known_nodes:%s (want %s)", state, known, want)
			}
			return nil
		})
	}
	return c
}

// requireVersion skips (or fails) the test if n is older than major.0.
func requireVersion(tb testing.TB, n *Redis, major int) {
	tb.Helper()
	v := infoField(n.mustDo(tb, "INFO", "server"), "redis_version")
	got, _, _ := strings.Cut(v, ".")
	if m, err := strconv.Atoi(got); err != nil || m < major {
		unavailable(tb, "redis-server %s is too old: %d.0 or newer is needed", v, major)
	}
}

// Addrs returns the nodes' client addresses, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Do sends a command to the cluster, starting at the first node that
// accepts a connection and following MOVED and ASK redirections, and
// returns the reply as described for the package-level [Do]. It is meant
// for single-key commands in test assertions, not as a cluster client.
func (c *Cluster) Do(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	var addr string
	for _, n := range c.Nodes {
		addr = n.Addr()
		if conn, err := net.DialTimeout("tcp", addr, doTimeout); err == nil {
			conn.Close()
			break
		}
	}
	asking := false
	for range 5 {
		cmds := [][]string{args}
		if asking {
			// ASK is a one-off redirection that the target honours only
			// for a command preceded by ASKING on the same connection.
			cmds = [][]string{{"ASKING"}, args}
		}
		rs, err := launch.RoundTrip(addr, doTimeout, cmds...)
		if err != nil {
			return "", err
		}
		r := rs[len(rs)-1]
		kind, target, ok := redirection(r)
		if !ok {
			return r.Text()
		}
		addr, asking = target, kind == "ASK"
	}
	return "", errors.New("testserver: too many cluster redirections")
}

// redirection parses "MOVED <slot> <addr>" and "ASK <slot> <addr>".
func redirection(r launch.Reply) (kind, addr string, ok bool) {
	if r.Kind != '-' {
		return "", "", false
	}
	f := strings.Fields(r.Str)
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return "", "", false
	}
	return f[0], f[2], true
}
