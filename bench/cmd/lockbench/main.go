// Command lockbench compares distlock with other Go lock libraries for
// Redis, side by side in one run, and writes BENCHMARKS.md.
//
// It starts its own redis-server processes (one, and five for Redlock) on
// free loopback ports, runs three scenarios with the libraries interleaved
// in every repetition, stops the servers and reports medians:
//
//	A  one goroutine, uncontended acquire+release, one node
//	B  the same over five nodes (Redlock)
//	C  several workers, each with its own client, contending for one key
//	D  A's loop on PostgreSQL, MariaDB and SQLite: sqllock beside a
//	   hand-written upsert + DELETE (servers started for the run)
//	E  A's loop and C's contention on a ZooKeeper ensemble: zklock beside
//	   go-zookeeper's lock recipe and a create + delete floor
//
// Usage (from the bench directory):
//
//	go run ./cmd/lockbench -out ../BENCHMARKS.md
//	go run ./cmd/lockbench -quick          # a smoke run of a few seconds
//	go run ./cmd/lockbench -from results/latest.json -out ../BENCHMARKS.md
//	                                       # the report again, from saved figures
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

type config struct {
	out      string // BENCHMARKS.md to write; "" prints the tables only
	chart    string // SVG chart; default bench/handoff.svg next to out
	jsonOut  string // raw results of every repetition, for inspection
	from     string // render the report from this -json file instead of running
	quick    bool
	reps     int
	warmup   int
	ops      int
	slices   int
	duration time.Duration
	workers  int
	hold     time.Duration
	ttl      time.Duration
	redis    string // redis-server executable
	only     string // regexp: run only the libraries whose name matches
	sql      bool   // scenario D: the SQL databases
	zk       bool   // scenario E: a ZooKeeper ensemble
}

func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "", "write the report to this Markdown `file` (e.g. ../BENCHMARKS.md)")
	flag.StringVar(&cfg.chart, "chart", "", "write the SVG chart to this `file` (default: bench/handoff.svg beside -out)")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write every repetition's raw figures to this JSON `file`")
	flag.StringVar(&cfg.from, "from", "", "run nothing: write the report and chart from the figures a run saved with -json in this `file`")
	flag.BoolVar(&cfg.quick, "quick", false, "smoke run: few operations, short contention; figures are not meaningful")
	flag.IntVar(&cfg.reps, "reps", 0, "repetitions, libraries interleaved in each (default 5; 3 with -quick)")
	flag.IntVar(&cfg.ops, "ops", 0, "measured acquire+release pairs per library per repetition in A and B (default 3000; 200 with -quick)")
	flag.IntVar(&cfg.slices, "slices", 0, "A and B: the measured pairs are split in this many slices, libraries taking turns slice by slice (default 10; 4 with -quick)")
	flag.IntVar(&cfg.warmup, "warmup", 0, "unmeasured pairs before each A and B measurement (default 200; 20 with -quick)")
	flag.DurationVar(&cfg.duration, "duration", 0, "length of each contended run (default 3s; 300ms with -quick)")
	flag.IntVar(&cfg.workers, "workers", 8, "contending workers in C, each with its own client")
	flag.DurationVar(&cfg.hold, "hold", 0, "time each worker holds the lock in C")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lease length given to every library")
	flag.StringVar(&cfg.redis, "redis-server", "redis-server", "redis-server `executable`")
	flag.StringVar(&cfg.only, "only", "", "run only libraries whose name matches this `regexp` (floors always run)")
	flag.BoolVar(&cfg.sql, "sql", true, "run scenario D on PostgreSQL, MariaDB and SQLite (servers started for the run)")
	flag.BoolVar(&cfg.zk, "zk", true, "run scenario E on a ZooKeeper ensemble of three servers started for the run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		stop()
		os.Exit(1)
	}
}

func (c *config) defaults() error {
	if c.chart == "" && c.out != "" {
		c.chart = filepath.Join(filepath.Dir(c.out), "bench", "handoff.svg")
	}
	if c.from != "" {
		return nil // the saved run's settings apply
	}
	pick := func(v *int, normal, quick int) {
		if *v == 0 {
			*v = normal
			if c.quick {
				*v = quick
			}
		}
	}
	pick(&c.reps, 5, 3)
	pick(&c.ops, 3000, 200)
	pick(&c.warmup, 200, 20)
	pick(&c.slices, 10, 4)
	if c.duration == 0 {
		c.duration = 3 * time.Second
		if c.quick {
			c.duration = 300 * time.Millisecond
		}
	}
	switch {
	case c.reps < 1, c.ops < 1, c.slices < 1, c.warmup < 0, c.workers < 2, c.duration <= 0, c.ttl <= 0, c.hold < 0:
		return errors.New("-reps, -ops, -slices and -duration must be positive, -workers at least 2, -warmup and -hold not negative")
	}
	if c.only != "" {
		if _, err := regexp.Compile(c.only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	return nil
}

// findRedis resolves the redis-server executable or explains how to get it.
func findRedis(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found (%v): install it with scripts/install-deps.sh, or pass -redis-server", name, err)
	}
	return p, nil
}
