package main

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"

	// Backends register their URL schemes when imported.
	_ "github.com/distlock-go/distlock/etcdlock"
	_ "github.com/distlock-go/distlock/memlock"
	_ "github.com/distlock-go/distlock/redislock"
	_ "github.com/distlock-go/distlock/redlock"
	_ "github.com/distlock-go/distlock/sqllock/sqlurl"
	_ "github.com/distlock-go/distlock/zklock"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// quiet discards go-redis's own log lines (dial retries, pool events):
// the commands report failures themselves, in one line each.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }
