package report

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// Markdown renders BENCHMARKS.md. chart is the path of the SVG relative to
// the file, or "" for none.
func Markdown(res *Results, chart string) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s := res.Settings

	single := summarizeAll(res.Single)
	redlock := summarizeAll(res.Redlock)
	var contended []contendedSummary
	for _, row := range res.Contended {
		contended = append(contended, summarizeContended(row))
	}
	rtt := math.NaN()
	for _, u := range single {
		if u.Lib.Role == locker.RoleRTT {
			rtt = u.P50
		}
	}
	rtt5 := math.NaN() // the five-node round trip, for the contended rows on five nodes
	for _, u := range redlock {
		if u.Lib.Role == locker.RoleRTT {
			rtt5 = u.P50
		}
	}

	w("# Benchmarks\n\n")
	w("distlock side by side with [go-redsync/redsync](https://github.com/go-redsync/redsync), ")
	w("[bsm/redislock](https://github.com/bsm/redislock) and [rueidislock](https://github.com/redis/rueidis/tree/main/rueidislock), ")
	w("measured in one run on one machine against local redis-server processes, with raw go-redis command sequences as floors.\n\n")
	w("This file is generated: `make bench` (which runs `scripts/bench.sh`, which runs `bench/cmd/lockbench`) rewrites it ")
	w("and the chart. Every figure is the median over %d repetitions of the same run, with the libraries interleaved in each; ", s.Reps)
	w("ratios are taken between medians of that run. Edit the generator, not this file.\n\n")
	if s.Quick {
		w("> **Smoke run (`-quick`)**: too few operations and too short a contention for the figures to mean anything. ")
		w("Run `make bench` for real figures.\n\n")
	}
	if !hasOurs(res) {
		w("> The distlock backends were not part of this run: only the peers and floors were measured.\n\n")
	}

	w("## Setup\n\n")
	w("| | |\n|---|---|\n")
	w("| Date | %s |\n", res.Env.Date)
	w("| Machine | %s/%s, %d logical CPUs (GOMAXPROCS %d), %s |\n", res.Env.OS, res.Env.Arch, res.Env.NumCPU, res.Env.GOMAXPROCS, res.Env.CPUModel)
	w("| Go | %s |\n", res.Env.GoVersion)
	w("| Redis | %s |\n", res.Env.RedisServer)
	w("| distlock | %s |\n", res.Env.Distlock)
	for _, m := range res.Env.Modules {
		w("| %s | %s |\n", m.Path, m.Version)
	}
	w("| Command | `%s` |\n", res.Env.Command)
	w("| Run | %d repetitions; A and B: %d measured acquire+release pairs per library (in %d slices) after %d unmeasured; C: %d workers for %v per library, hold %v; lease TTL %v for every library; total %v |\n\n",
		s.Reps, s.Ops, s.Slices, s.Warmup, s.Workers, s.Duration, s.Hold, s.TTL, res.Elapsed.Round(time.Second))
	w("The client and the servers share the machine's CPUs; on a small or busy machine, part of every latency is waiting ")
	w("for a CPU. Compare rows within this file, not with figures from another machine.\n\n")

	highlights(&b, single, redlock, contended)

	w("## A. Uncontended acquire + release, one node\n\n")
	w("One goroutine takes and releases one key, a single attempt each time (the key is always free).\n\n")
	uncontendedTables(&b, single)

	w("## B. Uncontended acquire + release, Redlock over five nodes\n\n")
	w("The same on five independent redis-server processes, quorum 3. bsm/redislock and rueidislock have no multi-master mode ")
	w("(rueidislock's KeyMajority spreads keys over one deployment) and are absent here.\n\n")
	uncontendedTables(&b, redlock)

	w("## C. Contention: %d workers, one key\n\n", s.Workers)
	w("%d goroutines, each with its own client (its own connections, as separate processes would have), take the same key ", s.Workers)
	w("with the library's blocking acquire, increment a shared counter, and release, as fast as they can for %v per library ", s.Duration)
	w("and repetition (hold time %v). The rows named \"5 nodes\" do the same over the five masters of B (Redlock, quorum 3); ", s.Hold)
	w("their round trip, and so their handoff in RTTs, is the five-node PING of B. The row named \"1 shared client\" gives all %d ", s.Workers)
	w("goroutines one client, as the goroutines of one process would share it. Definitions:\n\n")
	w("- **handoff**: an acquisition by a different worker than the last holder; its **latency** runs from the moment the last holder ")
	w("started its release call to the moment the next holder's acquire returned.\n")
	w("- **wait**: from the moment a worker wants the lock, through any give-ups and retries, until it holds it. A wait still ")
	w("running when the time is up counts with the time waited so far, so a starved worker shows up.\n")
	w("- **wait p99 of handoffs**: the same, over the acquisitions that were handoffs only, leaving out a barging worker's quick ")
	w("re-acquisitions, which can make up most of the samples.\n")
	w("- **re-acquired**: share of acquisitions won by the worker that held the lock last (barging).\n")
	w("- **give-ups**: acquire calls that returned an error while the run was still going; the worker then asks again. ")
	w("Total over all repetitions.\n")
	w("- **exclusion**: a shared counter is read and written (not atomically) under the lock and every holder checks that no ")
	w("other is inside; any overlap or lost update, totalled over all repetitions, is a broken lock.\n")
	if !math.IsNaN(rtt) {
		w("- **handoff in RTTs**: the handoff mean divided by the idle round trip, the median PING of scenario A (%s).\n", durNS(rtt))
	}
	w("- **RTT under load**: the median of PINGs sent every few milliseconds during the run on a separate connection: ")
	w("a round trip while the workers and the server share the CPUs. It grows with the load the library itself puts on ")
	w("the server and the machine, so it is context, not a yardstick.\n")
	w("\n")
	contendedTables(&b, contended, rtt, rtt5)
	if chart != "" && len(contended) > 0 {
		w("![Handoff latency (mean, p99) and wait (p99, max) per library, log scale](%s)\n\n", chart)
	}
	if hasOurs(res) {
		redisTargets(w, single, redlock, contended)
	}

	if len(res.SQL) > 0 {
		w("## D. SQL databases: uncontended acquire + release\n\n")
		w("Scenario A's loop (one goroutine, one attempt, the key always free) on private database servers started for the run ")
		w("(PostgreSQL with fsync off, MariaDB with innodb_flush_log_at_trx_commit=2, SQLite in WAL mode with synchronous=FULL in a temporary file), ")
		w("each library with its own *sql.DB. The floor is the hand-written table lock: an upsert that takes a free or expired ")
		w("row, then a DELETE. Server commands are not counted here (the column reads –).\n\n")
		for _, db := range res.SQL {
			w("### %s\n\n", db.Database)
			if db.Error != "" {
				w("Not measured: %s\n\n", db.Error)
				continue
			}
			uncontendedTables(&b, uncounted(summarizeAll(db.Rows)))
			if len(db.Contended) > 0 {
				w("Contention on %s: scenario C's loop, %d workers on one key, each with its own *sql.DB.\n\n", db.Database, s.Workers)
				var dc []contendedSummary
				for _, row := range db.Contended {
					dc = append(dc, uncountedContention(summarizeContended(row)))
				}
				contendedTables(&b, dc, math.NaN(), math.NaN())
			}
		}
		sqlTargets(w)
	}

	if z := res.ZooKeeper; z != nil {
		w("## E. ZooKeeper: an ensemble of %d servers\n\n", z.Servers)
		w("Scenario A's loop and scenario C's contention (%d workers, each with its own session) on a ZooKeeper ", s.Workers)
		w("ensemble started for the run on loopback (Debian's ZooKeeper 3.8, tickTime 200ms, forceSync=no), every library ")
		w("with its own connections. The floor creates an ephemeral node and deletes it. Server commands are not counted ")
		w("here (the column reads –), and the handoff is not divided by a round trip.\n\n")
		if z.Error != "" {
			w("Not measured: %s\n\n", z.Error)
		} else {
			w("### Uncontended acquire + release\n\n")
			uncontendedTables(&b, uncounted(summarizeAll(z.Uncontended)))
			w("### Contention: %d workers, one key\n\n", s.Workers)
			var zc []contendedSummary
			for _, row := range z.Contended {
				zc = append(zc, uncountedContention(summarizeContended(row)))
			}
			contendedTables(&b, zc, math.NaN(), math.NaN())
			zkTargets(w)
		}
	}

	w("## Server commands\n\n")
	w("Counted by the server (`INFO commandstats`, difference before and after each run), per acquire+release in A and B and ")
	w("per acquisition in C. Commands that scripts run are counted under their own names, so a script that calls SET shows as ")
	w("`evalsha` plus `set`.\n\n")
	w("| Scenario | Library | Commands |\n|---|---|---|\n")
	for _, sc := range []struct {
		name string
		rows []uncontendedSummary
	}{{"A", single}, {"B", redlock}} {
		for _, u := range sc.rows {
			w("| %s | %s | %s |\n", sc.name, u.Lib.Name, breakdown(u.Cmds))
		}
	}
	for _, c := range contended {
		w("| C | %s | %s |\n", c.Lib.Name, breakdown(c.Cmds))
	}
	w("\n")

	w("## Why the figures differ\n\n")
	seen := map[string]bool{}
	all := [][]Lib{libs(res.Single), libs(res.Redlock), contendedLibs(res.Contended)}
	for _, db := range res.SQL {
		all = append(all, libs(db.Rows))
	}
	if z := res.ZooKeeper; z != nil {
		all = append(all, libs(z.Uncontended), contendedLibs(z.Contended))
	}
	for _, rows := range all {
		for _, l := range rows {
			if seen[l.How] || l.How == "" {
				continue
			}
			seen[l.How] = true
			w("- **%s** (%s). %s\n", baseName(l.Name), l.Config, l.How)
		}
	}
	w("\nOn loopback a round trip costs tens of microseconds, so an uncontended figure is mostly round trips, and what a ")
	w("library adds shows in allocations and CPU time per call, and in hand-offs between goroutines: a call that passes ")
	w("its work to another goroutine and waits for it (a goroutine per node, a pipeline's writer and reader, a per-lock ")
	w("watchdog that must be started and then stopped) pays for waking that goroutine, which on an idle machine can cost ")
	w("as much as the round trip itself. Under contention the waiting strategy dominates: a poller ")
	w("learns of a release only at its next poll and competes with the releasing worker, which asks again at once; a ")
	w("notified waiter is told within about a round trip. Polling faster shortens the wait but costs server commands while ")
	w("the key is held, and a retry budget that runs out turns waiting into a give-up that the caller has to handle.\n\n")
	w("Fairness moves the wait figures in opposite directions. When the lock goes round the %d workers in turn, a worker ", s.Workers)
	w("waits for about %d handoffs every time, so its median wait is several handoffs long but its worst wait stays short. ", s.Workers-1)
	w("When the releasing worker can take the lock straight back, most acquisitions are such immediate re-acquisitions, ")
	w("which makes the median and even the p99 over all acquisitions small while the other workers wait for their next poll, ")
	w("sometimes for a long time: compare the re-acquired share, the per-worker spread, the wait max and the wait p99 of ")
	w("handoffs before reading the plain wait percentiles.\n\n")
	redlockContention(w)

	w("## Method\n\n")
	w("- `bench/cmd/lockbench` starts one redis-server for A and C and five for B, each on a free loopback port in a temporary ")
	w("directory with `--save \"\" --appendonly no`, and stops them when it ends.\n")
	w("- Each library is driven through the same small adapter (`bench/internal/locker`): an acquire that makes one attempt ")
	w("(A, B) or waits with the library's own strategy (C), returning a handle to release. Each library gets the same TTL and ")
	w("its own clients; the adapters build the library's per-lock object (redsync's Mutex, distlock's Mutex) for every ")
	w("acquisition, as code that locks a different key each time would.\n")
	w("- Latencies are per operation, on the monotonic clock (`time.Now`/`time.Since`). ops/s is measured operations over the ")
	w("time spent in the measured loops.\n")
	w("- In A and B every library of a repetition is connected and warmed up first; then the measured operations run in %d ", s.Slices)
	w("slices, the libraries taking turns slice by slice, so that a machine whose speed changes from one second to the next ")
	w("(other load, frequency scaling) slows every library alike rather than whichever ran at that moment. C runs each ")
	w("library's %v in one piece.\n", s.Duration)
	w("- Allocations are the difference of `runtime.MemStats` (Mallocs, TotalAlloc) around the measured loop, divided by ")
	w("the operations. The loop is a single goroutine, but the count includes what the library's own goroutines allocate ")
	w("meanwhile (connection readers, lease watchdogs), which is part of what it costs. It is the same measure ")
	w("`testing.B.ReportAllocs` uses; a plain loop lets the same run also record latencies and server commands.\n")
	w("- Each repetition runs every library in every scenario, in an order rotated by one each repetition. Every figure in ")
	w("the tables is the median over the repetitions that succeeded; an error in a repetition is reported, never hidden.\n")
	w("- Lease lengths are long (%v) compared with any hold, so no library renews during a hold: the libraries that renew ", s.TTL)
	w("automatically (distlock, rueidislock) keep that on, as users get it, and pay only for arming it.\n\n")

	w("## Running it\n\n")
	w("```sh\nmake bench                     # or scripts/bench.sh: needs redis-server (scripts/install-deps.sh)\n")
	w("cd bench && go run ./cmd/lockbench -quick    # smoke run, prints the tables\n")
	w("cd bench && go run ./cmd/lockbench -help     # repetitions, sizes, durations, -only\n```\n\n")
	w("The comparison lives in its own module (`bench/go.mod`), so the peer libraries never enter distlock's dependencies.\n")
	return b.Bytes()
}

func summarizeAll(rows []UncontendedRow) []uncontendedSummary {
	out := make([]uncontendedSummary, len(rows))
	for i, r := range rows {
		out[i] = summarizeUncontended(r)
	}
	return out
}

func hasOurs(res *Results) bool {
	for _, l := range libs(res.Single) {
		if l.Kind == locker.Ours {
			return true
		}
	}
	for _, l := range libs(res.Redlock) {
		if l.Kind == locker.Ours {
			return true
		}
	}
	return false
}

func libs(rows []UncontendedRow) []Lib {
	out := make([]Lib, len(rows))
	for i, r := range rows {
		out[i] = r.Lib
	}
	return out
}

func contendedLibs(rows []ContendedRow) []Lib {
	out := make([]Lib, len(rows))
	for i, r := range rows {
		out[i] = r.Lib
	}
	return out
}

// baseName drops the variant from a row name: "redsync (retry 1ms)" and
// "redsync, 5 nodes" are both explained under "redsync".
func baseName(name string) string {
	if i := strings.IndexAny(name, "(,"); i > 0 {
		return strings.TrimSpace(name[:i])
	}
	return name
}

// metric is one column of a table: how to read it and which way is better.
type metric[T any] struct {
	head   string
	get    func(T) float64
	format func(float64) string
	higher bool // higher is better
}

func num(prec int) func(float64) string {
	return func(x float64) string {
		if math.IsNaN(x) {
			return "–"
		}
		return fmt.Sprintf("%.*f", prec, x)
	}
}

func ratio(x, ref float64) string {
	if math.IsNaN(x) || math.IsNaN(ref) || ref == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/ref)
}

// best returns the best value of m among the peers' rows; NaN if none.
func best[T any](rows []T, kind func(T) locker.Kind, ok func(T) bool, m metric[T]) float64 {
	b := math.NaN()
	for _, r := range rows {
		if kind(r) != locker.Peer || !ok(r) {
			continue
		}
		v := m.get(r)
		if math.IsNaN(b) || (m.higher && v > b) || (!m.higher && v < b) {
			b = v
		}
	}
	return b
}

func uncontendedTables(b *bytes.Buffer, rows []uncontendedSummary) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	type u = uncontendedSummary
	ms := []metric[u]{
		{"p50", func(x u) float64 { return x.P50 }, durNS, false},
		{"p99", func(x u) float64 { return x.P99 }, durNS, false},
		{"ops/s", func(x u) float64 { return x.OpsPerSec }, num(0), true},
		{"allocs/op", func(x u) float64 { return x.AllocsPerOp }, num(1), false},
		{"B/op", func(x u) float64 { return x.BytesPerOp }, num(0), false},
		{"server cmds/op", func(x u) float64 { return x.CmdsPerOp }, num(1), false},
	}
	w("| Library |")
	for _, m := range ms {
		w(" %s |", m.head)
	}
	w("\n|---|")
	for range ms {
		w("---:|")
	}
	w("\n")
	for _, r := range rows {
		w("| %s |", rowName(r.Lib))
		for _, m := range ms {
			if r.N == 0 {
				w(" – |")
				continue
			}
			w(" %s |", m.format(m.get(r)))
		}
		w("\n")
	}
	w("\n")
	errorsOf(b, rows, func(r u) (string, []string) { return r.Lib.Name, r.Errors })

	// Ratios to the lock floor and to the best peer, figure by figure.
	var floor *u
	for i := range rows {
		if rows[i].Lib.Role == locker.RoleLock && rows[i].N > 0 {
			floor = &rows[i]
		}
	}
	kind := func(x u) locker.Kind { return x.Lib.Kind }
	ok := func(x u) bool { return x.N > 0 }
	w("Ratios, each figure divided by the same figure of **the floor** (%s) / of **the best peer** for that figure ", floorName(floor))
	w("(lowest, or highest for ops/s):\n\n")
	w("| Library |")
	for _, m := range ms {
		w(" %s |", m.head)
	}
	w("\n|---|")
	for range ms {
		w("---:|")
	}
	w("\n")
	for _, r := range rows {
		if r.Lib.Kind == locker.Floor || r.N == 0 {
			continue
		}
		w("| %s |", rowName(r.Lib))
		for _, m := range ms {
			f := math.NaN()
			if floor != nil {
				f = m.get(*floor)
			}
			w(" %s / %s |", ratio(m.get(r), f), ratio(m.get(r), best(rows, kind, ok, m)))
		}
		w("\n")
	}
	w("\n")
}

// uncounted marks the server commands of rows measured on a server that
// does not count them (the SQL databases, ZooKeeper) as not measured, so
// that the tables print a dash where they would print a zero.
func uncounted(rows []uncontendedSummary) []uncontendedSummary {
	for i := range rows {
		rows[i].CmdsPerOp = math.NaN()
	}
	return rows
}

// uncountedContention does the same for a contended row, whose round trip
// under load is not measured there either.
func uncountedContention(r contendedSummary) contendedSummary {
	r.CmdsPerAcq, r.RTT = math.NaN(), math.NaN()
	return r
}

func floorName(f *uncontendedSummary) string {
	if f == nil {
		return "not measured"
	}
	return f.Lib.Name
}

func rowName(l Lib) string {
	if l.Kind == locker.Ours {
		return "**" + l.Name + "**"
	}
	return l.Name
}

func errorsOf[T any](b *bytes.Buffer, rows []T, get func(T) (string, []string)) {
	for _, r := range rows {
		name, errs := get(r)
		if len(errs) == 0 {
			continue
		}
		fmt.Fprintf(b, "- %s failed %d repetition(s): %s\n", name, len(errs), errs[0])
	}
	for _, r := range rows {
		if _, errs := get(r); len(errs) > 0 {
			b.WriteString("\n")
			return
		}
	}
}

func contendedTables(b *bytes.Buffer, rows []contendedSummary, rtt1, rtt5 float64) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	type c = contendedSummary
	kind := func(x c) locker.Kind { return x.Lib.Kind }
	ok := func(x c) bool { return x.N > 0 }

	w("| Library | acquisitions/s | handoffs/s | re-acquired | per worker min–max | give-ups | server cmds/acq | exclusion |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		if r.N == 0 {
			w("| %s | – | – | – | – | – | – | – |\n", rowName(r.Lib))
			continue
		}
		excl := "ok"
		if r.Overlaps > 0 || r.LostUpdates > 0 {
			excl = fmt.Sprintf("**BROKEN**: %d overlaps, %d lost updates", r.Overlaps, r.LostUpdates)
		}
		w("| %s | %.0f | %.0f | %.1f%% | %.0f–%.0f | %d | %s | %s |\n", rowName(r.Lib),
			r.AcqPerSec, r.HandoffsPerSec, 100*r.Reacquired, r.PerWorkerMin, r.PerWorkerMax, r.GiveUps, num(1)(r.CmdsPerAcq), excl)
	}
	w("\n")

	lat := []metric[c]{
		{"handoff mean", func(x c) float64 { return x.HandoffMean }, durNS, false},
		{"handoff p99", func(x c) float64 { return x.HandoffP99 }, durNS, false},
		{"wait p50", func(x c) float64 { return x.WaitP50 }, durNS, false},
		{"wait p99", func(x c) float64 { return x.WaitP99 }, durNS, false},
		{"wait max", func(x c) float64 { return x.WaitMax }, durNS, false},
		{"wait p99 of handoffs", func(x c) float64 { return x.HandedWaitP99 }, durNS, false},
	}
	w("| Library |")
	for _, m := range lat {
		w(" %s |", m.head)
	}
	w(" RTT under load | handoff in RTTs |\n|---|")
	for range lat {
		w("---:|")
	}
	w("---:|---:|\n")
	for _, r := range rows {
		w("| %s |", rowName(r.Lib))
		for _, m := range lat {
			if r.N == 0 {
				w(" – |")
				continue
			}
			w(" %s |", m.format(m.get(r)))
		}
		rtts, rtt := "–", rtt1
		if r.Lib.Nodes > 1 {
			rtt = rtt5
		}
		if r.N > 0 && rtt > 0 {
			rtts = fmt.Sprintf("%.1f", r.HandoffMean/rtt)
		}
		w(" %s | %s |\n", durNS(r.RTT), rtts)
	}
	w("\n")
	errorsOf(b, rows, func(r c) (string, []string) { return r.Lib.Name, r.Errors })
	for _, r := range rows {
		if r.GiveUps > 0 && r.FirstErr != "" {
			w("- %s gave up %d time(s); first error: `%s`\n", r.Lib.Name, r.GiveUps, r.FirstErr)
		}
	}
	if slices.ContainsFunc(rows, func(r c) bool { return r.GiveUps > 0 && r.FirstErr != "" }) {
		w("\n")
	}

	all := append([]metric[c]{
		{"acquisitions/s", func(x c) float64 { return x.AcqPerSec }, num(0), true},
		{"handoffs/s", func(x c) float64 { return x.HandoffsPerSec }, num(0), true},
	}, lat...)
	all = append(all, metric[c]{"server cmds/acq", func(x c) float64 { return x.CmdsPerAcq }, num(1), false})
	w("Ratios to **the best peer** for each figure (lowest, or highest for the rates):\n\n| Library |")
	for _, m := range all {
		w(" %s |", m.head)
	}
	w("\n|---|")
	for range all {
		w("---:|")
	}
	w("\n")
	for _, r := range rows {
		if r.N == 0 {
			continue
		}
		w("| %s |", rowName(r.Lib))
		for _, m := range all {
			w(" %s |", ratio(m.get(r), best(rows, kind, ok, m)))
		}
		w("\n")
	}
	w("\n")
}

// breakdown lists commands per operation, most frequent first.
func breakdown(cmds map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range cmds {
		if v >= 0.005 {
			s = append(s, kv{k, v})
		}
	}
	if len(s) == 0 {
		return "–"
	}
	slices.SortFunc(s, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprintf("%s %s", e.k, trimNum(e.v))
	}
	return strings.Join(parts, " · ")
}

func trimNum(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// redlockContention explains distlock's waiting on Redis and Redlock,
// and where the server commands of the tables go.
func redlockContention(w func(string, ...any)) {
	w("### How distlock waits on Redis\n\n")
	w("**One node, plain lock**: a refused attempt enlists its client in a sorted set beside the lock, and the release ")
	w("names the client enlisted first in its message; that client's notifier wakes its own waiter, and the other clients ")
	w("keep sleeping. The releasing client, told so by the release, yields to the named one for 20 ms (or until the lock's ")
	w("channel brings it a message): its own attempts meanwhile only enlist it, so a worker that asks again at once does not ")
	w("take the lock straight back. A waiter whose subscription was live before its attempt sleeps at once after ")
	w("subscribing instead of trying again. **Fair lock**: the release grants the lock to the oldest live waiter in its ")
	w("own script and publishes the grant; the waiter's client hands it to the waiting goroutine without a request. The ")
	w("granted lease lasts as long as the waiter's place in line (3s by default), so a waiter that died in line holds the ")
	w("lock up no longer than that; the new holder renews it to the full TTL at once, in the background.\n\n")
	w("**Redlock**: a woken waiter asks the key's gate node (one of the five, chosen by the key's hash) first, and the ")
	w("other nodes only if the gate grants it, so of the waiters woken together one asks the quorum. A refusal at the ")
	w("gate enlists the client there, and the release wakes the client enlisted first, by name; the releasing client ")
	w("yields as on one node. A split vote's minority is given back without a message and retried after a random pause. ")
	w("The lock is still the quorum's: an error at the gate falls back to asking every node, and an enlisted waiter that ")
	w("hears no release for 250 ms asks every node again. `go test ./redlock -run '^$' -bench Contended -benchtime 1x` ")
	w("counts attempts and server commands per acquisition.\n\n")
	w("### Server commands per operation\n\n")
	w("One key holds a lock: its lease, or once released a small free record with the last token and the release's ")
	w("receipt, which the next lease carries on, so that a release repeated after a lost reply is recognised. An ")
	w("uncontended acquire reads the lock key and the fencing counter in one MGET, reads the server's TIME (the token's ")
	w("floor, so that tokens stay above those a failover to a lagging replica lost) and writes the lease; the release ")
	w("reads the lease and writes the free record over it: 7 commands with the two scripts (8 in fair mode, which also ")
	w("looks for a line). Redlock runs the same pair on each node, 35 on five; it writes a node's counter only when the ")
	w("lease could end before its 100 ms clock floor passes the token. A plain handoff on one node costs about 12: the ")
	w("release (the script, the read, the named client taken from the set, the free record, the message), the woken ")
	w("client's grant (4) and the releasing worker's attempt while it yields (3). `go test ./redislock -run '^$' -bench ")
	w("Handoff` reports the commands per acquisition of each mode.\n\n")
}

// zkTargets says which of the ZooKeeper targets the tables of E meet, and
// what the misses were measured to come from.
func zkTargets(w func(string, ...any)) {
	w("### Against the targets\n\n")
	w("The targets: uncontended at most 1.15× the floor and 1.05× `zk.Lock`; contended handoffs/s at least `zk.Lock`'s, ")
	w("wait p99 at most its, handoff mean at most 1.2× its; no plain worker below half the mean. ")
	w("Uncontended, zklock is faster than `zk.Lock` (an acquire is one transaction whose reply says whether the node is ")
	w("alone in line; the recipe creates, then lists) and about 1.2× the floor, which is a create and a delete with ")
	w("nothing else: the release also records the last token in its transaction, which a fencing token that survives ")
	w("the node needs. ")
	w("A fair waiter now sends as many requests per acquisition as `zk.Lock` (`go test ./zklock -run '^$' -bench ")
	w("Contended8` counts what the ensemble receives: 5.0 against 5.0) and takes the same path from a release to its ")
	w("grant (the release, the watch event, one listing; no request to hold); what keeps its handoff rate below the ")
	w("recipe's (0.86× in interleaved runs) is client work per handoff: 101 allocations against 59, a goroutine per ")
	w("backend call, the handle's timers and the root's wait loop, which the recipe has none of. After a hand-over the ")
	w("grant is valid for what is left of the waiter's place (3s), so the new holder renews it at once: one write more. ")
	w("A plain waiter costs the fair cycle plus its first attempt's sync, listing and read of the holder's lease (8.5 ")
	w("requests per acquisition), because the backend cannot tell a plain `Lock`'s first attempt from a `TryLock`'s, ")
	w("which must not leave a node in line; the root telling it (the request's queue flag for a `Lock`) would close that ")
	w("gap. Plain waiters keep their order: the slowest worker's share stays near the mean.\n\n")
}

// sqlTargets says which of the SQL targets the tables of D meet, and what
// the misses were measured to come from.
func sqlTargets(w func(string, ...any)) {
	w("### Against the targets\n\n")
	w("The package figures below come from `go test -c -o X ./sqllock; X -test.run '^$' -test.bench B -test.benchtime 2000x` ")
	w("(8 workers on one key beside the native lock on one private server; old and new code alternating, medians).\n\n")
	w("- **Uncontended, at most 1.15× the floor**: met on MariaDB and SQLite, missed on PostgreSQL. There the lease upsert ")
	w("alone costs about 1.5× the floor's (the token's sequence, the CASE expressions that judge a free, expired or own ")
	w("row, a wider row) and the release is an owner-checked UPDATE that keeps the row and its token, not a DELETE; the ")
	w("backend's Go work is under 5%% of its CPU (`-bench Uncontended`). A statement that draws a token only for a new ")
	w("lease is what remains to try.\n")
	w("- **Contended, at least 0.5× the native lock**: missed on both. On PostgreSQL (0.16×) each release's NOTIFY ")
	w("wakes every listening server backend, and 8 clients, 16 backends and the server share 2 CPUs; the advisory ")
	w("lock grants inside the server. Waiters blocked in the server on a wake lock, as on MariaDB, are the next step. ")
	w("On MariaDB waiters block in `GET_LOCK` on the key's wake lock, which the holder keeps: workers a process apart ")
	w("went from 93 to 939 handoffs/s (0.004× to 0.033× `GET_LOCK`, `-bench ContendedApart`); in one process that ")
	w("first sent every handoff through the server (1029 to 830), and a release now hands the wake lock to a waiter ")
	w("of its own process: 1191 to 2016 handoffs/s, 6.0 to 4.0 requests per acquisition (`-bench ")
	w("'Contended/MariaDB/sqllock$'`, 5 runs). What remains is the commits: a handoff (about 0.5 ms) costs about ")
	w("what an uncontended acquire and release cost above, two commits, and `GET_LOCK` writes nothing; the ")
	w("connection-scoped mode is the way to the native lock's rate.\n")
	w("- **Fair, at least 0.8× the native lock**: missed. On PostgreSQL (0.07×) a waiter entering the line runs a transaction of ")
	w("six requests (seven before it took ended places out while finding the first: 15.1 to 13.2 requests per ")
	w("acquisition, `-bench 'Contended/Postgres/sqllock-fair'`) that holds the key's row, and the one-statement ")
	w("hand-over waits behind it. On MariaDB the ")
	w("fair transactions prepared and closed each statement (three requests for one): run on statements prepared ")
	w("once per connection, 77 requests per acquisition became 31, and 210 handoffs/s 349 (`-bench ")
	w("'Contended/MariaDB/sqllock-fair'`, 3 runs; still under 0.02× `GET_LOCK`); waiters of other processes still poll, as the wake lock serves ")
	w("plain mutexes only. A line entered in one statement, and the wake lock for fair waiters, would close it.\n")
	w("- **Connection-scoped, at most 1.1× the native lock**: missed (about 3.3× on PostgreSQL, 3.5× on MariaDB): ")
	w("beside the native lock, the token is raised in the lease table and the session's idle limit set to the TTL, ")
	w("one statement on PostgreSQL and three on MySQL each way; setting the idle limit once per connection rather ")
	w("than per holding is what remains to try.\n")
	w("- **Fair offered on all three, per-worker max/min at most 1.2**: offered; met on PostgreSQL and MariaDB; ")
	w("missed on SQLite, where fair acquisitions go back to the last holder (the re-acquired column). A release hands ")
	w("the key only to a waiter already in line, and a waiter is in line once its attempt's transaction commits; SQLite ")
	w("lets its one writer in in no order (a blocked writer sleeps and tries again), so when the waiters that were handed ")
	w("the key have not yet got their next attempt in, the line is empty, the release frees the key, and the releasing ")
	w("worker, which does not sleep, takes it straight back. Counted over 800 turns of eight fair workers on one file ")
	w("in one process, every turn that went back followed a release that found no row in the line: with statements ")
	w("compiled in each transaction 242 of 800 releases found it empty and about 25%% of turns went back; with them ")
	w("prepared once, 4 of 800; with each transaction slowed by the race detector, 413 of 800 again. Keeping the fair ")
	w("attempts on a key made in one process in arrival order before they reach the file (its backends on one file ")
	w("share a hub already) would close it within a process.\n\n")
}
