package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	return s, nil
}

func (s *tortureServers) close() {
	for _, r := range s.nodes {
		_ = r.Close()
	}
}
