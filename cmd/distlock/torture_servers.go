package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/launch"
	"github.com/distlock-go/distlock/internal/torture"
)

// tortureServers are the servers 'distlock torture --servers' started.
type tortureServers struct {
	url      string
	nodes    []launch.Server
	sentinel *launch.Sentinel // for kind sentinel
	dir      string           // for kind sqlite: the database's directory
}

// errNoRedis is the error for a missing redis-server.
var errNoRedis = errors.New("redis-server not found in PATH: install it with scripts/install-deps.sh (or apt-get install redis-server), or give --url")

// startTortureServers starts the deployment kind names (see serverKinds)
// on free loopback ports.
func startTortureServers(ctx context.Context, kind string) (*tortureServers, error) {
	n, persistent := 1, true
	switch kind {
	case "redis":
	case "redis-nopersist":
		persistent = false
	case "redlock":
		n = 3
	case "sentinel":
		return startTortureSentinel(ctx, 2)
	case "sentinel-one":
		return startTortureSentinel(ctx, 1)
	case "sentinel-nowait":
		return startTortureSentinel(ctx, 0)
	case "zk":
		return startTortureZooKeeper(ctx)
	case "etcd":
		return startTortureEtcd(ctx)
	case "postgres":
		return startTortureDatabase(ctx, launch.StartPostgres, false)
	case "mariadb":
		return startTortureDatabase(ctx, launch.StartMariaDB, false)
	case "postgres-connection":
		return startTortureDatabase(ctx, launch.StartPostgres, true)
	case "mariadb-connection":
		return startTortureDatabase(ctx, launch.StartMariaDB, true)
	case "sqlite":
		dir, err := os.MkdirTemp("", "distlock-torture-")
		if err != nil {
			return nil, err
		}
		return &tortureServers{url: "sqlite://" + filepath.ToSlash(filepath.Join(dir, "locks.db")), dir: dir}, nil
	default:
		return nil, fmt.Errorf("unknown server kind %q", kind)
	}
	s := &tortureServers{}
	var addrs []string
	for range n {
		r, err := launch.StartRedis(ctx, launch.RedisConfig{Persistent: persistent})
		if err != nil {
			s.close()
			if errors.Is(err, launch.ErrNoRedisServer) {
				return nil, errNoRedis
			}
			return nil, err
		}
		s.nodes = append(s.nodes, r)
		addrs = append(addrs, r.Addr())
	}
	if kind == "redlock" {
		s.url = "redlock://" + strings.Join(addrs, ",")
	} else {
		s.url = "redis://" + addrs[0] + "/0"
	}
	if !persistent {
		// This kind exists to show what a restart without persistence
		// does when nothing protects against it.
		s.url += "?restart_guard=off&clock_tokens=off"
	} else {
		s.url += "?" + durableGuard
		if err := declareFresh(ctx, s.url); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// startTortureSentinel starts a master, two replicas and three sentinels,
// with the fsynced append-only file on master and replicas. Grants and
// renewals wait for that many replicas to have them (the URL's replicas
// option).
//
// Only waiting for every replica (2, kind sentinel) keeps the lock through
// a failover: Sentinel promotes a replica while the old master may still
// grant, and the other replica, still following the old master, can
// confirm such a grant that the promoted one never receives (1, kind
// sentinel-one). With 0 (sentinel-nowait) a failover also loses the grants
// the promoted replica had not received yet. The exclusion check reports
// both. The price of waiting for every replica is that nothing is granted
// while one is missing: after a failover, until the old master has been
// demoted and has caught up, which the failover fault therefore lasts.
// The sentinels demote a replaced master about a second after it is back
// (QuickRejoin) rather than Sentinel's 8 to 10 s, so that a run of
// seconds sees grants between its failovers.
func startTortureSentinel(ctx context.Context, replicas int) (*tortureServers, error) {
	sn, err := launch.StartSentinel(ctx, launch.SentinelConfig{Persistent: true, Replicas: 2, QuickRejoin: true})
	if err != nil {
		if errors.Is(err, launch.ErrNoRedisServer) {
			return nil, errNoRedis
		}
		return nil, err
	}
	s := &tortureServers{sentinel: sn,
		url: "redis+sentinel://" + strings.Join(sn.SentinelAddrs(), ",") + "/" + sn.MasterName + "?replicas=" + strconv.Itoa(replicas) + "&" + durableGuard}
	for _, n := range sn.Nodes {
		s.nodes = append(s.nodes, n)
	}
	if err := declareFresh(ctx, s.url); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// startTortureEtcd starts a 3-member etcd cluster (the program the
// repository's etcdlock tests build, or $DISTLOCK_ETCD).
func startTortureEtcd(ctx context.Context) (*tortureServers, error) {
	ms, err := launch.StartEtcd(ctx, 3)
	if err != nil {
		return nil, err
	}
	s := &tortureServers{}
	var addrs []string
	for _, m := range ms {
		s.nodes = append(s.nodes, m)
		addrs = append(addrs, m.Addr())
	}
	s.url = "etcd://" + strings.Join(addrs, ",")
	return s, nil
}

// startTortureDatabase starts a database server (PostgreSQL with fsync
// off, MariaDB flushing its log once a second: what the test servers do)
// and gives its workers the lease table, or with connScoped the
// database's own locks, held on a connection each (lock=connection).
func startTortureDatabase(ctx context.Context, start func(context.Context) (*launch.Database, error), connScoped bool) (*tortureServers, error) {
	d, err := start(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(d.URL())
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	if connScoped {
		q := u.Query()
		q.Set("lock", "connection")
		u.RawQuery = q.Encode()
	}
	return &tortureServers{url: u.String(), nodes: []launch.Server{d}}, nil
}

// startTortureZooKeeper starts an ensemble of three ZooKeeper servers.
// Their sessions last at least two ticks of 200ms; the workers ask for
// 2s, so that a paused or cut-off worker loses its session, and its
// ephemeral nodes, within a few seconds.
func startTortureZooKeeper(ctx context.Context) (*tortureServers, error) {
	zs, err := launch.StartEnsemble(ctx, launch.ZooKeeperConfig{}, 3)
	if err != nil {
		return nil, err
	}
	s := &tortureServers{}
	var addrs []string
	for _, z := range zs {
		s.nodes = append(s.nodes, z)
		addrs = append(addrs, z.Addr())
	}
	s.url = "zk://" + strings.Join(addrs, ",") + "/distlock-torture?session_timeout=2s"
	return s, nil
}

// configure sets what cfg needs to know of the servers for the server
// faults.
func (s *tortureServers) configure(cfg *torture.Config) {
	cfg.URL, cfg.Servers = s.url, s.nodes
	sn := s.sentinel
	if sn == nil {
		return
	}
	cfg.Primary = func() launch.Server {
		if m := sn.Master(); m != nil {
			return m
		}
		return nil // not a typed nil: the faults test for nil
	}
	cfg.Restart = func(ctx context.Context, srv launch.Server) error {
		r, ok := srv.(*launch.Redis)
		if !ok {
			return fmt.Errorf("not a server of the Sentinel deployment: %s", srv.Addr())
		}
		return sn.Restart(ctx, r)
	}
	cfg.Routes = sn.Addrs()
	cfg.Failover = func(ctx context.Context, pause bool) error {
		var err error
		if pause {
			_, err = sn.PauseMaster(ctx)
		} else {
			_, err = sn.Failover(ctx)
		}
		if err != nil {
			return err
		}
		// The fault lasts until the deployment is whole again: until then
		// a grant that waits for every replica cannot be made.
		return sn.AwaitReplicas(ctx)
	}
}

// durableGuard is the URL option of the deployments whose servers put
// every write in an fsynced append-only file: a server restarted by a
// fault loads back what it had, the guard's marker included, so the guard
// lets it grant at once. With the guard's default (wait out the maximum
// lease length, a minute, after any restart) one server restart left the
// rest of a 20s run with nothing granted.
const durableGuard = "restart_guard=durable"

// declareFresh tells the restart guard of the servers at rawURL, which were
// just started empty, that they lost no data, so that the first grants do
// not wait for a maximum lease length.
func declareFresh(ctx context.Context, rawURL string) error {
	c, err := distlock.Open(ctx, rawURL)
	if err != nil {
		return err
	}
	defer c.Close()
	d, ok := c.Backend().(interface{ DeclareFresh(context.Context) error })
	if !ok {
		return fmt.Errorf("backend of %s cannot declare its servers fresh", rawURL)
	}
	// Servers just started on a loaded machine may miss a node timeout:
	// the declaration is safe to repeat.
	for attempt := 1; ; attempt++ {
		err := d.DeclareFresh(ctx)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *tortureServers) close() {
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	if s.sentinel != nil {
		_ = s.sentinel.Close()
		return
	}
	for _, r := range s.nodes {
		_ = r.Close()
	}
}
