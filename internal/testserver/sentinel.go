package testserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

const (
	// sentinelQuorum is the number of sentinels (of three) that must agree
	// that the master is down before a failover.
	sentinelQuorum = 2
	// setupTimeout bounds replication sync, sentinel discovery and cluster
	// convergence. Discovery relies on hello messages sent every 2 s.
	setupTimeout = 30 * time.Second
	// failoverTimeout bounds Failover, including retries while the
	// sentinels are still in the cool-down of a previous failover.
	failoverTimeout = 30 * time.Second
	// pollTimeout keeps a paused or killed node from stalling a wait loop.
	pollTimeout = time.Second
)

// Sentinel is a Redis Sentinel deployment: a master, one replica and three
// sentinels monitoring them with a quorum of 2. The sentinels consider a
// master down after 1 s without a reply and use a failover timeout of 3 s,
// so an automatic failover follows a Pause or Kill of the master within a
// few seconds.
//
// Master and Replica describe the roles as of the last Failover; an
// automatic failover triggered by a test does not update them.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	MasterName string
	// Master is the node that currently holds the master role.
	Master *Redis
	// Replica is the node that currently replicates from Master.
	Replica *Redis
	// Sentinels are the three sentinel processes; Do, Pause, Kill and
	// Restart work on them as on any server.
	Sentinels []*Redis
}

// StartSentinel starts a master, a replica and three sentinels, and returns
// once the replica is in sync and every sentinel knows the master, the
// replica and both other sentinels. opts apply to the master and the
// replica, not to the sentinels. The master is marked fresh (see
// [FreshMarker]), and the replica copies the mark.
func StartSentinel(tb testing.TB, opts ...Option) *Sentinel {
	tb.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := &Sentinel{MasterName: "distlock-master"}
	s.Master = startRedis(tb, cfg)
	s.Master.markFresh(tb)

	rcfg := cfg
	rcfg.extra = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port())}, cfg.extra...)
	s.Replica = startRedis(tb, rcfg)

	// The replica must be listed by the master before the sentinels start:
	// a sentinel learns about replicas from the master's INFO, which it
	// sends on connecting and then only every 10 s.
	waitFor(tb, setupTimeout, "the replica to sync with the master", s.checkReplication)

	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 3000\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		s.MasterName, s.Master.Port(), sentinelQuorum)
	for range 3 {
		s.Sentinels = append(s.Sentinels, startRedis(tb, config{conf: conf, sentinel: true}))
	}

	s.WaitSynced(tb)
	return s
}

// WaitSynced waits until Replica is in sync with Master and every sentinel
// names Master as the master and knows Replica and both other sentinels,
// as StartSentinel does before returning. After Failover it waits for the
// old master to be demoted, which the sentinels do about 10 s later.
func (s *Sentinel) WaitSynced(tb testing.TB) {
	tb.Helper()
	waitFor(tb, setupTimeout, "the replica to sync with the master", s.checkReplication)
	for _, sn := range s.Sentinels {
		waitFor(tb, setupTimeout, "sentinel "+sn.Addr()+" to know the deployment", func() error {
			return s.checkSentinel(sn)
		})
	}
}

// checkReplication reports why Replica is not yet replicating from Master.
func (s *Sentinel) checkReplication() error { return replicating(s.Replica, s.Master) }

// checkSentinel reports what sentinel sn does not know yet.
func (s *Sentinel) checkSentinel(sn *Redis) error {
	rs, err := launch.RoundTrip(sn.Addr(), pollTimeout,
		[]string{"SENTINEL", "get-master-addr-by-name", s.MasterName},
		[]string{"SENTINEL", "replicas", s.MasterName},
		[]string{"SENTINEL", "sentinels", s.MasterName},
		[]string{"SENTINEL", "ckquorum", s.MasterName},
	)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := r.Err(); err != nil {
			return err
		}
	}
	master, _ := rs[0].Text() // host and port on two lines
	if got := strings.ReplaceAll(master, "\n", ":"); got != s.Master.Addr() {
		return fmt.Errorf("master is %q, want %s", got, s.Master.Addr())
	}
	replicas := rs[1].Elems
	if len(replicas) != 1 {
		return fmt.Errorf("knows %d replicas, want 1", len(replicas))
	}
	if flags := field(replicas[0], "flags"); flags != "slave" {
		return fmt.Errorf("replica flags %q", flags)
	}
	if n := len(rs[2].Elems); n != 2 {
		return fmt.Errorf("knows %d other sentinels, want 2", n)
	}
	return nil
}

// field looks key up in one entry of a SENTINEL listing, which RESP2
// encodes as a flat array of alternating names and values.
func field(entry launch.Reply, key string) string {
	for i := 0; i+1 < len(entry.Elems); i += 2 {
		if entry.Elems[i].Str == key {
			return entry.Elems[i+1].Str
		}
	}
	return ""
}

// SentinelAddrs returns the addresses of the three sentinels.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// Failover makes the sentinels promote Replica (SENTINEL FAILOVER) and
// returns once every reachable sentinel names it as the master and it
// reports role:master; Master and Replica are then swapped. The old master
// is turned into a replica by the sentinels asynchronously, about 10 s
// later (see WaitSynced): until then it still accepts writes, as in a real
// split brain.
//
// Sentinels refuse a new failover of the same master for a while after
// the previous one (NOGOODSLAVE until they see the old master demoted);
// Failover keeps asking until about 30 s have passed.
func (s *Sentinel) Failover(tb testing.TB) {
	tb.Helper()
	target := s.Replica
	waitFor(tb, failoverTimeout, "failover to "+target.Addr(), func() error {
		agreed := 0
		for _, sn := range s.Sentinels {
			got, err := Do(sn.Addr(), pollTimeout, "SENTINEL", "get-master-addr-by-name", s.MasterName)
			if err != nil {
				continue // a sentinel the test has stopped gets no vote
			}
			if got = strings.ReplaceAll(got, "\n", ":"); got != target.Addr() {
				// Only the first reachable sentinel is asked: it is the one
				// that performs the failover, so it switches first, and the
				// others must just learn the result rather than start a
				// competing failover from their stale view.
				if agreed == 0 {
					return s.askFailover(sn)
				}
				return fmt.Errorf("sentinel %s still names master %s", sn.Addr(), got)
			}
			agreed++
		}
		if agreed == 0 {
			return errors.New("no sentinel is reachable")
		}
		info, err := Do(target.Addr(), pollTimeout, "INFO", "replication")
		if err != nil {
			return err
		}
		if role := infoField(info, "role"); role != "master" {
			return fmt.Errorf("%s reports role:%s", target.Addr(), role)
		}
		return nil
	})
	s.Master, s.Replica = target, s.Master
}

// askFailover starts a failover on sn unless one is already under way, so
// that a failover which was aborted (or never started) is asked for again.
func (s *Sentinel) askFailover(sn *Redis) error {
	rs, err := launch.RoundTrip(sn.Addr(), pollTimeout, []string{"SENTINEL", "master", s.MasterName})
	if err != nil {
		return err
	}
	if err := rs[0].Err(); err != nil {
		return err
	}
	if strings.Contains(field(rs[0], "flags"), "failover_in_progress") {
		return fmt.Errorf("failover in progress on %s", sn.Addr())
	}
	_, err = Do(sn.Addr(), pollTimeout, "SENTINEL", "FAILOVER", s.MasterName)
	var re ReplyError
	if err == nil || errors.As(err, &re) && strings.HasPrefix(string(re), "INPROG") {
		return fmt.Errorf("failover requested from %s", sn.Addr())
	}
	// Typically NOGOODSLAVE: no fresh enough view of the replica yet.
	return fmt.Errorf("SENTINEL FAILOVER on %s: %w", sn.Addr(), err)
}
