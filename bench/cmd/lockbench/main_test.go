package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/bench/internal/report"
)

// TestQuick runs the whole benchmark in -quick mode against real
// redis-server processes and checks that every library ran, no lock broke,
// and the report and chart were written.
func TestQuick(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("DISTLOCK_REQUIRE_SERVERS") != "" {
			t.Fatalf("redis-server not found: run scripts/install-deps.sh")
		}
		t.Skip("redis-server not found: run scripts/install-deps.sh to run this test")
	}
	if testing.Short() {
		t.Skip("a quick benchmark run takes several seconds")
	}
	dir := t.TempDir()
	cfg := config{
		out:     filepath.Join(dir, "BENCHMARKS.md"),
		jsonOut: filepath.Join(dir, "results.json"),
		quick:   true,
		workers: 4,
		ttl:     10 * time.Second,
		redis:   "redis-server",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	if err := run(ctx, cfg, io.Discard, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}

	raw, err := os.ReadFile(cfg.jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var res report.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	for _, rows := range [][]report.UncontendedRow{res.Single, res.Redlock} {
		for _, r := range rows {
			if len(r.Errors) > 0 || len(r.Runs) != res.Settings.Reps {
				t.Errorf("%s: %d of %d repetitions, errors %q", r.Lib.Name, len(r.Runs), res.Settings.Reps, r.Errors)
			}
			for _, u := range r.Runs {
				if u.P50 <= 0 || u.P99 < u.P50 || u.AllocsPerOp <= 0 || len(u.Cmds) == 0 {
					t.Errorf("%s: implausible figures %+v", r.Lib.Name, u)
				}
			}
		}
	}
	if len(res.Contended) < 4 {
		t.Errorf("%d contended rows, want at least the 4 peers", len(res.Contended))
	}
	for _, r := range res.Contended {
		if len(r.Errors) > 0 || len(r.Runs) != res.Settings.Reps {
			t.Errorf("%s: %d of %d repetitions, errors %q", r.Lib.Name, len(r.Runs), res.Settings.Reps, r.Errors)
		}
		for _, c := range r.Runs {
			if c.Overlaps != 0 || c.LostUpdates != 0 {
				t.Errorf("%s: mutual exclusion broken: %d overlaps, %d lost updates", r.Lib.Name, c.Overlaps, c.LostUpdates)
			}
			if c.Acquisitions == 0 || c.WaitMax < c.WaitP99 {
				t.Errorf("%s: implausible figures %+v", r.Lib.Name, c)
			}
		}
	}

	md, err := os.ReadFile(cfg.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## A.", "## B.", "## C.", "Smoke run", "floor: SET NX PX + DEL", "redsync", "bsm/redislock", "rueidislock", "](bench/handoff.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "bench", "handoff.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wellFormed(svg); err != nil {
		t.Errorf("handoff.svg: %v", err)
	}

	// -from renders the same report from the saved figures, running nothing.
	again := config{from: cfg.jsonOut, out: filepath.Join(dir, "again.md"), redis: "/nonexistent/redis-server"}
	if err := run(ctx, again, io.Discard, io.Discard); err != nil {
		t.Fatalf("run -from: %v", err)
	}
	if md2, err := os.ReadFile(again.out); err != nil || !bytes.Equal(md2, md) {
		t.Errorf("-from wrote a different report (%v):\n%s", err, md2)
	}
	if err := run(ctx, config{from: cfg.out, redis: "redis-server"}, io.Discard, io.Discard); err == nil {
		t.Errorf("run -from a Markdown file succeeded; want an error")
	}
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func TestRedisAtLeast(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"Redis server v=7.0.15 sha=0", true},
		{"Redis server v=7.0.5 sha=0", true},
		{"Redis server v=7.0.4 sha=0", false},
		{"Redis server v=6.2.14 sha=0", false},
		{"Redis server v=7.2.0 sha=0", true},
		{"Valkey server v=8.0.1 sha=0", true},
		{"garbage", false},
	} {
		if got := redisAtLeast(c.v, 7, 0, 5); got != c.want {
			t.Errorf("redisAtLeast(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestRotation(t *testing.T) {
	got := rotation(4, 5)
	want := []int{1, 2, 3, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rotation(4, 5) = %v, want %v", got, want)
		}
	}
}
