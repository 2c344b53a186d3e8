package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
	"github.com/distlock-go/distlock/bench/internal/redisproc"
	"github.com/distlock-go/distlock/bench/internal/report"
	"github.com/distlock-go/distlock/bench/internal/scenario"
)

// run starts the servers, runs every scenario cfg.reps times and writes the
// report. Progress goes to log, the tables to out.
func run(ctx context.Context, cfg config, out, log io.Writer) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	bin, err := findRedis(cfg.redis)
	if err != nil {
		return err
	}
	began := time.Now()
	res := &report.Results{
		Env: environment(bin),
		Settings: report.Settings{
			Quick: cfg.quick, Reps: cfg.reps, Warmup: cfg.warmup, Ops: cfg.ops, Slices: cfg.slices,
			Duration: cfg.duration, Workers: cfg.workers, Hold: cfg.hold, TTL: cfg.ttl,
		},
	}
	single, redlock, contended := libraries(cfg, res.Env.RedisServer)

	// Six servers: one for A and C, five for B.
	var servers []*redisproc.Server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	for range 6 {
		s, err := redisproc.Start(ctx, bin)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	one := []string{servers[0].Addr()}
	five := make([]string, 5)
	for i, s := range servers[1:] {
		five[i] = s.Addr()
	}
	fmt.Fprintf(log, "lockbench: redis-server on %s (A, C) and %s (B); %d repetitions\n", one[0], strings.Join(five, " "), cfg.reps)
	obsOne, obsFive := scenario.NewObserver(one), scenario.NewObserver(five)
	defer obsOne.Close()
	defer obsFive.Close()

	res.Single = make([]report.UncontendedRow, len(single))
	res.Redlock = make([]report.UncontendedRow, len(redlock))
	res.Contended = make([]report.ContendedRow, len(contended))
	for i, l := range single {
		res.Single[i].Lib = report.LibOf(l)
	}
	for i, l := range redlock {
		res.Redlock[i].Lib = report.LibOf(l)
	}
	for i, l := range contended {
		res.Contended[i].Lib = report.LibOf(l)
	}

	for rep := range cfg.reps {
		// Every repetition runs every library, in an order rotated by
		// one each time, so that drift of the machine (other load, thermal
		// state, the server's memory) does not favour a fixed position.
		if err := runUncontended(ctx, cfg, rep, "A", single, res.Single, one, obsOne, log); err != nil {
			return err
		}
		if err := runUncontended(ctx, cfg, rep, "B", redlock, res.Redlock, five, obsFive, log); err != nil {
			return err
		}
		for _, i := range rotation(len(contended), rep) {
			l := contended[i]
			r, err := scenario.RunContended(ctx, l, one, obsOne, scenario.ContendedConfig{
				Key: key("C", l.Name, rep), Workers: cfg.workers, Duration: cfg.duration, Hold: cfg.hold, TTL: cfg.ttl,
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				res.Contended[i].Errors = append(res.Contended[i].Errors, err.Error())
				fmt.Fprintf(log, "  %d/%d C %-34s error: %v\n", rep+1, cfg.reps, l.Name, err)
				continue
			}
			res.Contended[i].Runs = append(res.Contended[i].Runs, r)
			fmt.Fprintf(log, "  %d/%d C %-34s %7.0f acq/s handoff %-9s wait p99 %-9s give-ups %d\n",
				rep+1, cfg.reps, l.Name, r.AcqPerSec, report.Dur(r.HandoffMean), report.Dur(r.WaitP99), r.GiveUps)
		}
	}
	res.Elapsed = time.Since(began)

	md, svg := report.Markdown(res, chartLink(cfg)), report.Chart(res)
	if cfg.out != "" {
		if err := writeFile(cfg.out, md); err != nil {
			return err
		}
		fmt.Fprintf(log, "lockbench: wrote %s\n", cfg.out)
	} else {
		fmt.Fprintf(out, "%s", md)
	}
	if cfg.chart != "" {
		if err := writeFile(cfg.chart, svg); err != nil {
			return err
		}
		fmt.Fprintf(log, "lockbench: wrote %s\n", cfg.chart)
	}
	if cfg.jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFile(cfg.jsonOut, b); err != nil {
			return err
		}
		fmt.Fprintf(log, "lockbench: wrote %s\n", cfg.jsonOut)
	}
	fmt.Fprintf(log, "lockbench: done in %v\n", res.Elapsed.Round(time.Second))
	return nil
}

// runUncontended runs one repetition of scenario A or B: every library is
// connected and warmed up, then the measured operations are run in slices,
// the libraries taking turns slice by slice.
func runUncontended(ctx context.Context, cfg config, rep int, scen string, libs []locker.Library, rows []report.UncontendedRow, addrs []string, obs *scenario.Observer, log io.Writer) error {
	runs := make([]*scenario.UncontendedRun, len(libs))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.Close()
			}
		}
	}()
	fail := func(i int, err error) {
		rows[i].Errors = append(rows[i].Errors, err.Error())
		fmt.Fprintf(log, "  %d/%d %s %-34s error: %v\n", rep+1, cfg.reps, scen, libs[i].Name, err)
		if runs[i] != nil {
			runs[i].Close()
			runs[i] = nil
		}
	}
	for _, i := range rotation(len(libs), rep) {
		r, err := scenario.StartUncontended(ctx, libs[i], addrs, obs, scenario.UncontendedConfig{
			Key: key(scen, libs[i].Name, rep), Warmup: cfg.warmup, TTL: cfg.ttl,
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fail(i, err)
			continue
		}
		runs[i] = r
	}
	slices := min(cfg.slices, cfg.ops)
	for s := range slices {
		n := cfg.ops/slices + btoi(s < cfg.ops%slices)
		for _, i := range rotation(len(libs), rep+s) {
			if runs[i] == nil {
				continue
			}
			err := runs[i].Slice(ctx, n)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fail(i, err)
			}
		}
	}
	for i, r := range runs {
		if r == nil {
			continue
		}
		u := r.Result()
		rows[i].Runs = append(rows[i].Runs, u)
		fmt.Fprintf(log, "  %d/%d %s %-34s p50 %-9s p99 %-9s %5.1f allocs/op %4.1f cmds/op\n",
			rep+1, cfg.reps, scen, libs[i].Name, report.Dur(u.P50), report.Dur(u.P99), u.AllocsPerOp, scenario.Total(u.Cmds))
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// libraries returns the contenders of scenarios A, B and C.
func libraries(cfg config, redisVersion string) (single, redlock, contended []locker.Library) {
	noLoop := redisAtLeast(redisVersion, 7, 0, 5)
	single = []locker.Library{
		locker.PingFloor(1),
		locker.SetDelFloor(1),
		locker.Redsync(1, 0),
		locker.BSM(time.Millisecond),
		locker.Rueidis(noLoop),
	}
	redlock = []locker.Library{
		locker.PingFloor(5),
		locker.SetDelFloor(5),
		locker.Redsync(5, 0),
	}
	contended = []locker.Library{
		locker.Redsync(1, 0),
		locker.Redsync(1, time.Millisecond),
		locker.BSM(time.Millisecond),
		locker.Rueidis(noLoop),
	}
	for _, l := range locker.Distlock() {
		switch {
		case l.Nodes > 1:
			redlock = append(redlock, l)
		default:
			single = append(single, l)
		}
		if l.Contended {
			contended = append(contended, l)
		}
	}
	if cfg.only != "" {
		re := regexp.MustCompile(cfg.only)
		keep := func(ls []locker.Library) []locker.Library {
			var out []locker.Library
			for _, l := range ls {
				if l.Kind == locker.Floor || re.MatchString(l.Name) {
					out = append(out, l)
				}
			}
			return out
		}
		single, redlock, contended = keep(single), keep(redlock), keep(contended)
	}
	return single, redlock, contended
}

// redisAtLeast reports whether a `redis-server --version` line names a
// version of at least major.minor.patch.
func redisAtLeast(version string, major, minor, patch int) bool {
	i := strings.Index(version, "v=")
	if i < 0 {
		return false
	}
	var a, b, c int
	if _, err := fmt.Sscanf(version[i+2:], "%d.%d.%d", &a, &b, &c); err != nil {
		return false
	}
	if a != major {
		return a > major
	}
	if b != minor {
		return b > minor
	}
	return c >= patch
}

// rotation returns 0..n-1 rotated left by k.
func rotation(n, k int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (i + k) % max(n, 1)
	}
	return order
}

// key names the lock of one run; no two runs share a key.
func key(scen, lib string, rep int) string {
	return fmt.Sprintf("lockbench:%s:%d:%s", scen, rep, strings.Map(func(r rune) rune {
		if r == ' ' || r == '(' || r == ')' || r == ',' {
			return '-'
		}
		return r
	}, lib))
}

// chartLink is the chart's path relative to the report, as Markdown needs.
func chartLink(cfg config) string {
	if cfg.chart == "" {
		return ""
	}
	if cfg.out == "" {
		return cfg.chart
	}
	rel, err := filepath.Rel(filepath.Dir(cfg.out), cfg.chart)
	if err != nil {
		return cfg.chart
	}
	return filepath.ToSlash(rel)
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
