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
	"github.com/distlock-go/distlock/bench/internal/report"
	"github.com/distlock-go/distlock/bench/internal/scenario"
	"github.com/distlock-go/distlock/internal/launch"
)

// run starts the servers, runs every scenario cfg.reps times and writes the
// report. Progress goes to log, the tables to out.
func run(ctx context.Context, cfg config, out, log io.Writer) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if cfg.from != "" {
		return rerender(cfg, out, log)
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
	var servers []*launch.Redis
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	for range 6 {
		s, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin})
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

	var dbs []*database
	if cfg.sql {
		var stopDBs func()
		dbs, stopDBs = startDatabases(ctx, res, log)
		defer stopDBs()
	}
	noCmds := scenario.NewObserver(nil)
	var zkAddrs []string
	zkLibs := locker.ZooKeeper()
	if cfg.zk {
		var stopZK func()
		zkAddrs, stopZK = startZooKeeper(ctx, res, zkLibs, log)
		defer stopZK()
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
			addrs, obs := one, obsOne
			if l.Nodes > 1 {
				addrs, obs = five, obsFive
			}
			r, err := scenario.RunContended(ctx, l, addrs, obs, scenario.ContendedConfig{
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
	for rep := range cfg.reps {
		for i, db := range dbs {
			if db == nil {
				continue
			}
			scen := "D " + res.SQL[i].Database
			if err := runUncontended(ctx, cfg, rep, scen, locker.SQL(db.driver), res.SQL[i].Rows, []string{db.dsn}, noCmds, log); err != nil {
				return err
			}
			if err := runContended(ctx, cfg, rep, scen, contendedOnly(locker.SQL(db.driver)), res.SQL[i].Contended, []string{db.dsn}, noCmds, log); err != nil {
				return err
			}
		}
	}
	for rep := range cfg.reps {
		if zkAddrs == nil {
			break
		}
		if err := runUncontended(ctx, cfg, rep, "E", zkLibs, res.ZooKeeper.Uncontended, zkAddrs, noCmds, log); err != nil {
			return err
		}
		if err := runContended(ctx, cfg, rep, "E", contendedOnly(zkLibs), res.ZooKeeper.Contended, zkAddrs, noCmds, log); err != nil {
			return err
		}
	}
	res.Elapsed = time.Since(began)
	return write(cfg, res, out, log)
}

// rerender writes the report of the run whose figures cfg.from holds (a
// -json file), so that a change to the report's text needs no new run.
func rerender(cfg config, out, log io.Writer) error {
	data, err := os.ReadFile(cfg.from)
	if err != nil {
		return err
	}
	res := &report.Results{}
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("-from %s: %w", cfg.from, err)
	}
	if res.Elapsed == 0 {
		return fmt.Errorf("-from %s: not the figures of a lockbench run (write them with -json)", cfg.from)
	}
	cfg.jsonOut = ""
	return write(cfg, res, out, log)
}

// write writes res as the report (cfg.out, or out), the chart and the raw
// figures (cfg.jsonOut).
func write(cfg config, res *report.Results, out, log io.Writer) error {
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

// database is one database of scenario D: how database/sql opens it, and
// how to stop it.
type database struct {
	driver, dsn string
	close       func() error
}

// serverDatabase starts a database server with start.
func serverDatabase(start func(context.Context) (*launch.Database, error)) func(context.Context) (*database, error) {
	return func(ctx context.Context) (*database, error) {
		s, err := start(ctx)
		if err != nil {
			return nil, err
		}
		return &database{driver: s.Driver(), dsn: s.DSN(), close: s.Close}, nil
	}
}

// sqliteDatabase is a database file in a new temporary directory, opened
// as sqllock's sqlite:// URLs open it: WAL, a busy timeout, and
// synchronous=FULL.
func sqliteDatabase(context.Context) (*database, error) {
	dir, err := os.MkdirTemp("", "lockbench-sqlite-*")
	if err != nil {
		return nil, err
	}
	return &database{
		driver: "sqlite",
		dsn: "file:" + filepath.Join(dir, "locks.db") +
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)",
		close: func() error { return os.RemoveAll(dir) },
	}, nil
}

// startDatabases starts the SQL servers of scenario D, with the one
// launcher the tests use. One that cannot start is reported in the
// results and left out.
func startDatabases(ctx context.Context, res *report.Results, log io.Writer) ([]*database, func()) {
	starts := []struct {
		name  string
		start func(context.Context) (*database, error)
	}{
		{"PostgreSQL", serverDatabase(launch.StartPostgres)},
		{"MariaDB", serverDatabase(launch.StartMariaDB)},
		{"SQLite", sqliteDatabase},
	}
	var dbs []*database
	for _, st := range starts {
		s, err := st.start(ctx)
		row := report.SQLRows{Database: st.name}
		if err != nil {
			row.Error = err.Error()
			fmt.Fprintf(log, "lockbench: %s not started: %v\n", st.name, err)
			s = nil
		} else {
			for _, l := range locker.SQL(s.driver) {
				row.Rows = append(row.Rows, report.UncontendedRow{Lib: report.LibOf(l)})
			}
			for _, l := range contendedOnly(locker.SQL(s.driver)) {
				row.Contended = append(row.Contended, report.ContendedRow{Lib: report.LibOf(l)})
			}
		}
		dbs = append(dbs, s)
		res.SQL = append(res.SQL, row)
	}
	return dbs, func() {
		for _, s := range dbs {
			if s != nil {
				_ = s.close()
			}
		}
	}
}

// startZooKeeper starts scenario E's ensemble and returns its client
// addresses, or nil if it cannot start (reported in the results).
func startZooKeeper(ctx context.Context, res *report.Results, libs []locker.Library, log io.Writer) ([]string, func()) {
	const servers = 3
	z := &report.ZooKeeperRows{Servers: servers}
	res.ZooKeeper = z
	zs, err := launch.StartEnsemble(ctx, launch.ZooKeeperConfig{}, servers)
	if err != nil {
		z.Error = err.Error()
		fmt.Fprintf(log, "lockbench: ZooKeeper not started: %v\n", err)
		return nil, func() {}
	}
	var addrs []string
	for _, s := range zs {
		addrs = append(addrs, s.Addr())
	}
	for _, l := range libs {
		z.Uncontended = append(z.Uncontended, report.UncontendedRow{Lib: report.LibOf(l)})
	}
	for _, l := range contendedOnly(libs) {
		z.Contended = append(z.Contended, report.ContendedRow{Lib: report.LibOf(l)})
	}
	fmt.Fprintf(log, "lockbench: ZooKeeper ensemble on %s (E)\n", strings.Join(addrs, " "))
	return addrs, func() {
		for _, s := range zs {
			_ = s.Close()
		}
	}
}

// contendedOnly returns the libraries of libs that can wait.
func contendedOnly(libs []locker.Library) []locker.Library {
	var out []locker.Library
	for _, l := range libs {
		if l.Contended {
			out = append(out, l)
		}
	}
	return out
}

// runContended runs one repetition of a contended scenario on addrs, every
// library in turn, in an order rotated by rep.
func runContended(ctx context.Context, cfg config, rep int, scen string, libs []locker.Library, rows []report.ContendedRow, addrs []string, obs *scenario.Observer, log io.Writer) error {
	for _, i := range rotation(len(libs), rep) {
		l := libs[i]
		r, err := scenario.RunContended(ctx, l, addrs, obs, scenario.ContendedConfig{
			Key: key(scen, l.Name, rep), Workers: cfg.workers, Duration: cfg.duration, Hold: cfg.hold, TTL: cfg.ttl,
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			rows[i].Errors = append(rows[i].Errors, err.Error())
			fmt.Fprintf(log, "  %d/%d %s %-34s error: %v\n", rep+1, cfg.reps, scen, l.Name, err)
			continue
		}
		rows[i].Runs = append(rows[i].Runs, r)
		fmt.Fprintf(log, "  %d/%d %s %-34s %7.0f acq/s handoff %-9s wait p99 %-9s give-ups %d\n",
			rep+1, cfg.reps, scen, l.Name, r.AcqPerSec, report.Dur(r.HandoffMean), report.Dur(r.WaitP99), r.GiveUps)
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
		locker.Redsync(5, time.Millisecond),
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
		if l.Name == locker.DistlockRedis().Name {
			contended = append(contended, locker.DistlockRedisShared())
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
