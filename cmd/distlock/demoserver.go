package main

import (
	"context"

	"github.com/distlock-go/distlock/internal/launch"
)

// startDemoRedis starts the redis-server the demo uses when it is given no
// --url: on a free port of 127.0.0.1, with no persistence and its files in
// a temporary directory, declared fresh so that the demo's first locks do
// not wait for the restart guard. The caller must Close it.
func startDemoRedis(ctx context.Context) (*launch.Redis, error) {
	srv, err := launch.StartRedis(ctx, launch.RedisConfig{})
	if err != nil {
		return nil, err
	}
	if err := declareFresh(ctx, demoURL(srv)); err != nil {
		_ = srv.Close()
		return nil, err
	}
	return srv, nil
}

// demoURL returns the URL of the demo's server.
func demoURL(srv *launch.Redis) string { return "redis://" + srv.Addr() + "/0" }
