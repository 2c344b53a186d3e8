package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/launch"
)

// tortureServers are the servers 'distlock torture --servers' started.
type tortureServers struct {
	url   string
	nodes []*launch.Redis
}

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
				return nil, errors.New("redis-server not found in PATH: install it with scripts/install-deps.sh (or apt-get install redis-server), or give --url")
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
	} else if err := declareFresh(ctx, s.url); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

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
	return d.DeclareFresh(ctx)
}

func (s *tortureServers) close() {
	for _, r := range s.nodes {
		_ = r.Close()
	}
}
