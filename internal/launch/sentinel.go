package launch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Timeouts of a Sentinel deployment.
const (
	// sentinelSetupTimeout bounds replication sync and sentinel discovery,
	// which relies on hello messages sent every 2 s.
	sentinelSetupTimeout = 30 * time.Second
	// sentinelPoll bounds each question asked while waiting, so that a
	// paused node cannot stall a wait.
	sentinelPoll = time.Second
)

// SentinelConfig describes a Sentinel deployment to start. The zero value
// is a master, one replica and three sentinels with a quorum of two, a
// master considered down after 1 s without a reply and a failover timeout
// of 3 s, without persistence.
type SentinelConfig struct {
	// Replicas is the number of replicas (default 1).
	Replicas int
	// Persistent gives the master and the replicas the append-only file
	// of [RedisConfig.Persistent].
	Persistent bool
	// DownAfter is how long the sentinels wait for an answer before they
	// consider a node down (default 1 s).
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout (default 3 s).
	FailoverTimeout time.Duration
	// QuickRejoin makes a master that a failover replaced follow the new
	// one about a second after it is back, instead of eight to ten:
	// Sentinel demotes such a server only after it has seen it report the
	// master role for four publish periods (2 s each by default), reading
	// its INFO every 10 s. QuickRejoin sets those periods to 250 ms and
	// 1 s with SENTINEL DEBUG, which Redis has from 7.0 on; an older
	// sentinel keeps its own. It also ends Sentinel's TILT mode, in which
	// a sentinel whose timer ran late by more than 2 s (a loaded machine)
	// takes no action, after 5 s instead of 30.
	QuickRejoin bool
}

// Sentinel is a running Sentinel deployment: redis-server processes for
// the data (a master and its replicas, whose roles change with failovers)
// and three sentinels watching them, all on loopback.
type Sentinel struct {
	// MasterName is the name the sentinels know the master by.
	MasterName string
	// Nodes are the data servers; Nodes[0] was the master at the start.
	Nodes []*Redis
	// Sentinels are the three sentinel processes.
	Sentinels []*Redis
}

// StartSentinel starts the deployment cfg describes and returns once every
// replica is in sync and every sentinel knows the master, every replica
// and the other sentinels. The caller must Close it.
func StartSentinel(ctx context.Context, cfg SentinelConfig) (s *Sentinel, err error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = time.Second
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 3 * time.Second
	}
	s = &Sentinel{MasterName: "distlock-master"}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	master, err := StartRedis(ctx, RedisConfig{Persistent: cfg.Persistent})
	if err != nil {
		return nil, err
	}
	s.Nodes = append(s.Nodes, master)
	for range cfg.Replicas {
		r, err := StartRedis(ctx, RedisConfig{Persistent: cfg.Persistent,
			Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}})
		if err != nil {
			return nil, err
		}
		s.Nodes = append(s.Nodes, r)
	}
	// A sentinel learns about replicas from the master's INFO, which it
	// reads on connecting and then every 10 s: the replicas must be listed
	// before the sentinels start.
	if err := waitUntil(ctx, sentinelSetupTimeout, "the replicas to sync", func() error {
		return s.replicating(master.Addr())
	}); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
		"sentinel down-after-milliseconds %[1]s %[3]d\n"+
		"sentinel failover-timeout %[1]s %[4]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		s.MasterName, master.Port(), cfg.DownAfter.Milliseconds(), cfg.FailoverTimeout.Milliseconds())
	for range 3 {
		sn, err := StartRedis(ctx, RedisConfig{Conf: conf, Sentinel: true})
		if err != nil {
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, sn)
		if cfg.QuickRejoin {
			// An older Redis refuses the command and keeps its periods.
			_, _ = sn.Do(sentinelPoll, "SENTINEL", "DEBUG", "INFO-PERIOD", "1000", "PUBLISH-PERIOD", "250", "TILT-PERIOD", "5000")
		}
	}
	if err := waitUntil(ctx, sentinelSetupTimeout, "the sentinels to know the deployment", func() error {
		for _, sn := range s.Sentinels {
			if err := s.knows(sn, master.Addr()); err != nil {
				return fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		out[i] = sn.Addr()
	}
	return out
}

// Addrs returns the address of every process of the deployment: the
// sentinels' and the data nodes'. A client of the deployment dials no
// other.
func (s *Sentinel) Addrs() []string {
	out := s.SentinelAddrs()
	for _, n := range s.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Master returns the data node the first sentinel that answers names as
// the master, or nil if none answers or it names an unknown address.
func (s *Sentinel) Master() *Redis {
	addr, err := s.masterAddr()
	if err != nil {
		return nil
	}
	return s.node(addr)
}

func (s *Sentinel) node(addr string) *Redis {
	for _, n := range s.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// masterAddr asks the sentinels, in turn, for the master's address.
func (s *Sentinel) masterAddr() (string, error) {
	var last error = errors.New("no sentinel")
	for _, sn := range s.Sentinels {
		got, err := sn.Do(sentinelPoll, "SENTINEL", "get-master-addr-by-name", s.MasterName)
		if err == nil {
			return strings.ReplaceAll(got, "\n", ":"), nil
		}
		last = err
	}
	return "", last
}

// Failover asks the sentinels for a failover (SENTINEL FAILOVER) and
// returns the new master's address once every sentinel that answers names
// it and it reports role:master. Sentinels refuse a failover for a while
// after the previous one, until they see the old master demoted; Failover
// keeps asking until ctx ends.
//
// The old master is demoted by the sentinels asynchronously, seconds
// later: until then it still accepts writes, as in a real split brain.
func (s *Sentinel) Failover(ctx context.Context) (string, error) {
	old, err := s.masterAddr()
	if err != nil {
		return "", err
	}
	var master string
	err = waitUntil(ctx, 0, "a failover away from "+old, func() error {
		agreed := 0
		for _, sn := range s.Sentinels {
			got, err := sn.Do(sentinelPoll, "SENTINEL", "get-master-addr-by-name", s.MasterName)
			if err != nil {
				continue // a paused or killed sentinel gets no vote
			}
			got = strings.ReplaceAll(got, "\n", ":")
			if got == old {
				if agreed == 0 {
					// Only the first sentinel that answers is asked: the
					// others learn the result rather than start a
					// competing failover.
					return s.askFailover(sn)
				}
				return fmt.Errorf("sentinel %s still names %s", sn.Addr(), old)
			}
			if master != "" && got != master {
				return fmt.Errorf("sentinels disagree: %s and %s", master, got)
			}
			master = got
			agreed++
		}
		if agreed == 0 {
			return errors.New("no sentinel answers")
		}
		info, err := Do(master, sentinelPoll, []string{"INFO", "replication"})
		if err != nil {
			return err
		}
		if role := infoField(info[0], "role"); role != "master" {
			return fmt.Errorf("%s reports role:%s", master, role)
		}
		return nil
	})
	return master, err
}

// PauseMaster pauses the master (SIGSTOP) until the sentinels have
// promoted a replica, as they do once it has not answered for DownAfter,
// then resumes it and returns the new master's address. The old master
// comes back believing it is still the master, until the sentinels demote
// it, seconds later. If ctx ends first, the master is resumed and ctx's
// error returned.
func (s *Sentinel) PauseMaster(ctx context.Context) (string, error) {
	old, err := s.masterAddr()
	if err != nil {
		return "", err
	}
	m := s.node(old)
	if m == nil {
		return "", fmt.Errorf("launch: the sentinels name an unknown master %s", old)
	}
	if err := m.Pause(); err != nil {
		return "", err
	}
	defer m.Resume()
	var master string
	err = waitUntil(ctx, 0, "the sentinels to replace the paused master "+old, func() error {
		got, err := s.masterAddr()
		if err != nil {
			return err
		}
		if got == old {
			return errors.New("still named")
		}
		master = got
		return nil
	})
	return master, err
}

// Restart restarts node n in the role the sentinels give it now, as a
// server whose configuration file Sentinel rewrites would come back: as a
// replica of the master they name, or as the master if they name n. Its
// data survives as for [Redis.Restart].
func (s *Sentinel) Restart(ctx context.Context, n *Redis) error {
	args := []string{}
	if master, err := s.masterAddr(); err == nil && master != n.Addr() {
		host, port, _ := strings.Cut(master, ":")
		args = []string{"--replicaof", host, port}
	}
	n.mu.Lock()
	n.cfg.Args = args
	n.mu.Unlock()
	return n.Restart(ctx)
}

// AwaitReplicas waits until every server of the deployment but the master
// the sentinels name replicates from it with its link up: after a
// failover, until the old master has been demoted and has caught up. A
// client that waits for every replica (WAIT) can be granted nothing before.
func (s *Sentinel) AwaitReplicas(ctx context.Context) error {
	return waitUntil(ctx, 0, "every replica to follow the master", func() error {
		master, err := s.masterAddr()
		if err != nil {
			return err
		}
		return s.replicating(master)
	})
}

// askFailover starts a failover on sn unless one is under way.
func (s *Sentinel) askFailover(sn *Redis) error {
	flags, err := s.masterField(sn, "flags")
	if err != nil {
		return err
	}
	if strings.Contains(flags, "failover_in_progress") {
		return fmt.Errorf("failover in progress on %s", sn.Addr())
	}
	_, err = sn.Do(sentinelPoll, "SENTINEL", "FAILOVER", s.MasterName)
	var re ReplyError
	if err == nil || errors.As(err, &re) && strings.HasPrefix(string(re), "INPROG") {
		return fmt.Errorf("failover requested from %s", sn.Addr())
	}
	// Typically NOGOODSLAVE: no fresh enough view of a replica yet.
	return fmt.Errorf("SENTINEL FAILOVER on %s: %w", sn.Addr(), err)
}

// masterField returns one field of SENTINEL MASTER, whose reply is a flat
// list of alternating names and values.
func (s *Sentinel) masterField(sn *Redis, name string) (string, error) {
	got, err := sn.Do(sentinelPoll, "SENTINEL", "MASTER", s.MasterName)
	if err != nil {
		return "", err
	}
	kv := strings.Split(got, "\n")
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == name {
			return kv[i+1], nil
		}
	}
	return "", fmt.Errorf("SENTINEL MASTER on %s has no %s", sn.Addr(), name)
}

// knows reports what sentinel sn does not know yet about a deployment
// whose master is at master.
func (s *Sentinel) knows(sn *Redis, master string) error {
	got, err := sn.Do(sentinelPoll, "SENTINEL", "get-master-addr-by-name", s.MasterName)
	if err != nil {
		return err
	}
	if got = strings.ReplaceAll(got, "\n", ":"); got != master {
		return fmt.Errorf("names master %s, want %s", got, master)
	}
	for field, want := range map[string]int{"num-slaves": len(s.Nodes) - 1, "num-other-sentinels": len(s.Sentinels) - 1} {
		v, err := s.masterField(sn, field)
		if err != nil {
			return err
		}
		if v != strconv.Itoa(want) {
			return fmt.Errorf("%s is %s, want %d", field, v, want)
		}
	}
	return nil
}

// replicating reports why a node other than master does not replicate
// from it yet.
func (s *Sentinel) replicating(master string) error {
	for _, n := range s.Nodes {
		if n.Addr() == master {
			continue
		}
		rs, err := Do(n.Addr(), sentinelPoll, []string{"INFO", "replication"})
		if err != nil {
			return err
		}
		info := rs[0]
		if got := infoField(info, "master_host") + ":" + infoField(info, "master_port"); got != master {
			return fmt.Errorf("%s follows %q, want %s", n.Addr(), got, master)
		}
		if st := infoField(info, "master_link_status"); st != "up" {
			return fmt.Errorf("%s: master_link_status=%q", n.Addr(), st)
		}
	}
	return nil
}

// Close stops every process of the deployment and removes their
// directories.
func (s *Sentinel) Close() error {
	var errs []error
	for _, sn := range s.Sentinels {
		errs = append(errs, sn.Close())
	}
	for _, n := range s.Nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// waitUntil calls check every 50 ms until it returns nil, ctx ends or,
// if timeout is positive, timeout passes; the error names what was
// awaited and check's last error.
func waitUntil(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		err := check()
		if err == nil {
			return nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("launch: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
	}
}
