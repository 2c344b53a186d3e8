package report

import (
	"math"
	"strings"

	"github.com/distlock-go/distlock/bench/internal/locker"
)

// A target is one of the figures distlock's Redis backends aim for, judged
// on this run's medians.
type target struct {
	name     string  // what is aimed for
	got, ref float64 // distlock's figure and the figure it is held against
	limit    float64 // got must be at most limit×ref (or, higher, at least)
	higher   bool    // more is better
	format   func(float64) string
	count    bool   // a count: shown to 0.01 where 0.1 would hide a miss
	against  string // the reference, named; "" when ref is the target itself
	cause    string // why it is missed, when it is; "" for none known
}

func (t target) measured() bool { return !math.IsNaN(t.got) && !math.IsNaN(t.ref) && t.ref != 0 }

func (t target) met() bool {
	if t.higher {
		return t.got >= t.limit*t.ref
	}
	return t.got <= t.limit*t.ref
}

// notifiedPeers are the peers whose waiters are told of a release rather
// than polling: the yardstick of a wait that does not spin.
var notifiedPeers = []string{"rueidislock"}

// redisTargets judges this run against the targets of the Redis backends
// and, for each one missed, says what was measured to cause it.
func redisTargets(w func(string, ...any), single, redlock []uncontendedSummary, contended []contendedSummary) {
	find := func(name string) *uncontendedSummary {
		for _, rows := range [][]uncontendedSummary{single, redlock} {
			for i := range rows {
				if rows[i].Lib.Name == name && rows[i].N > 0 {
					return &rows[i]
				}
			}
		}
		return nil
	}
	findC := func(name string) *contendedSummary {
		for i := range contended {
			if contended[i].Lib.Name == name && contended[i].N > 0 {
				return &contended[i]
			}
		}
		return nil
	}
	floorOf := func(rows []uncontendedSummary) *uncontendedSummary {
		for i := range rows {
			if rows[i].Lib.Role == locker.RoleLock && rows[i].N > 0 {
				return &rows[i]
			}
		}
		return nil
	}
	bestPeer := func(rows []uncontendedSummary) *uncontendedSummary {
		var b *uncontendedSummary
		for i := range rows {
			if rows[i].Lib.Kind == locker.Peer && rows[i].N > 0 && (b == nil || rows[i].P50 < b.P50) {
				b = &rows[i]
			}
		}
		return b
	}
	bestC := func(nodes int, ok func(contendedSummary) bool, get func(contendedSummary) float64, higher bool) (float64, string) {
		v, name := math.NaN(), ""
		for _, r := range contended {
			if r.Lib.Kind != locker.Peer || r.N == 0 || (r.Lib.Nodes > 1) != (nodes > 1) || !ok(r) {
				continue
			}
			if x := get(r); math.IsNaN(v) || higher && x > v || !higher && x < v {
				v, name = x, r.Lib.Name
			}
		}
		return v, name
	}
	anyPeer := func(contendedSummary) bool { return true }
	notified := func(r contendedSummary) bool {
		for _, p := range notifiedPeers {
			if strings.HasPrefix(r.Lib.Name, p) {
				return true
			}
		}
		return false
	}
	nan := math.NaN()
	val := func(p *uncontendedSummary, get func(uncontendedSummary) float64) float64 {
		if p == nil {
			return nan
		}
		return get(*p)
	}
	valC := func(p *contendedSummary, get func(contendedSummary) float64) float64 {
		if p == nil {
			return nan
		}
		return get(*p)
	}
	nameOf := func(p *uncontendedSummary) string {
		if p == nil {
			return "not measured"
		}
		return p.Lib.Name
	}
	p50 := func(u uncontendedSummary) float64 { return u.P50 }
	cmds := func(u uncontendedSummary) float64 { return u.CmdsPerOp }
	allocs := func(u uncontendedSummary) float64 { return u.AllocsPerOp }
	ours := find("distlock (redislock)")
	rl := find("distlock (redlock), 5 nodes")
	floor, peer := floorOf(single), bestPeer(single)
	peer5 := bestPeer(redlock)
	c, cf, c5 := findC("distlock (redislock)"), findC("distlock (redislock, fair)"), findC("distlock (redlock), 5 nodes")
	hand, handName := bestC(1, anyPeer, func(r contendedSummary) float64 { return r.HandoffsPerSec }, true)
	waitN, waitNName := bestC(1, notified, func(r contendedSummary) float64 { return r.WaitP99 }, false)
	hand5, hand5Name := bestC(5, anyPeer, func(r contendedSummary) float64 { return r.HandoffsPerSec }, true)
	wait5, wait5Name := bestC(5, anyPeer, func(r contendedSummary) float64 { return r.WaitP99 }, false)

	ratioFmt := func(x float64) string { return num(2)(x) + "×" }
	cmdFmt := num(1)
	ts := []target{
		{name: "A: p50, one node", got: val(ours, p50), ref: val(floor, p50), limit: 1.15, format: durNS, against: nameOf(floor),
			cause: "Two Lua scripts, where the floor sends two plain commands: the acquire script runs three commands (an MGET of the lock and its counter, TIME, the SET), the release script two (GET, SET), and a script's call costs the server more than a plain command; on an idle loopback, where a round trip is short, that fixed cost weighs the more."},
		{name: "A: p50, one node", got: val(ours, p50), ref: val(peer, p50), limit: 1.05, format: durNS, against: nameOf(peer),
			cause: "The same scripts: the peers take the lock with a plain SET NX and carry no fencing token, receipt or restart guard."},
		{name: "A: server commands per acquire+release", got: val(ours, cmds), ref: 6, limit: 1, format: cmdFmt, count: true,
			cause: "The acquire reads TIME to floor the fencing token at the server clock: without it a token given as the last plus one, kept only by a lease and its free record, could outlast them above a clock set back, and the next grant would go lower. The release reads the lease for its owner before it writes the free record; a blind SET … GET would need the lease's token in the driver's Lease."},
		{name: "A: allocations per acquire+release", got: val(ours, allocs), ref: 21, limit: 1, format: cmdFmt, count: true},
		{name: "B: p50, five nodes", got: val(rl, p50), ref: val(peer5, p50), limit: 1.05, format: durNS, against: nameOf(peer5),
			cause: "Lua on five servers that share two CPUs with the client: `go test ./redlock -run '^$' -bench FloorScripts` (the five acquire scripts in parallel, then the five releases, with no Redlock logic) costs about twice the bare SET NX and DEL, and the backend about as much as those scripts."},
		{name: "B: server commands per acquire+release", got: val(rl, cmds), ref: 25, limit: 1, format: cmdFmt, count: true,
			cause: "Seven per node, as on one node (A's causes); the counter is written only when the lease could end before the 100 ms clock floor passes its token. Five per node needs A's two."},
		{name: "C: handoffs/s", got: valC(c, func(r contendedSummary) float64 { return r.HandoffsPerSec }), ref: hand, limit: 1.2, higher: true, format: num(0), against: handName,
			cause: "A handoff is two trips: the release, whose message wakes the client it names, then that client's attempt, with goroutine wake-ups between them on two shared CPUs. A grant made by the release to the named plain waiter, as fair mode does, would make it one; the root package would then have to tell the backend which owner waits and when it gives up."},
		{name: "C: wait p99", got: valC(c, func(r contendedSummary) float64 { return r.WaitP99 }), ref: waitN, limit: 1, format: durNS, against: waitNName + ", whose waiters are notified"},
		{name: "C: server commands per acquisition", got: valC(c, func(r contendedSummary) float64 { return r.CmdsPerAcq }), ref: 12, limit: 1, format: cmdFmt, count: true,
			cause: "The release (5: the script, the read, the named waiter taken from the set, the free record, the message), the woken waiter's grant (4) and the releasing worker's attempt while it yields (3)."},
		{name: "C: fair handoff, in round trips under load", got: valC(cf, func(r contendedSummary) float64 { return r.HandoffMean / r.RTT }), ref: 2, limit: 1, format: ratioFmt,
			cause: "The release grants in its own script and publishes the grant; what the handoff adds to that round trip is the message's way to the waiter and the waiting goroutine's wake-up on two CPUs shared with the server and seven other clients."},
		{name: "C: handoffs/s, five nodes", got: valC(c5, func(r contendedSummary) float64 { return r.HandoffsPerSec }), ref: hand5, limit: 1, higher: true, format: num(0), against: hand5Name},
		{name: "C: wait p99, five nodes", got: valC(c5, func(r contendedSummary) float64 { return r.WaitP99 }), ref: wait5, limit: 1, format: durNS, against: wait5Name,
			cause: "Which waiter the gate node grants after a release is not a queue's order over five nodes: the one named by the release asks first, but a waiter whose fallback poll comes due at that moment can take the gate before it."},
		{name: "C: server commands per acquisition, five nodes", got: valC(c5, func(r contendedSummary) float64 { return r.CmdsPerAcq }), ref: 40, limit: 1, format: cmdFmt, count: true,
			cause: "The winner's five acquire scripts and the release's five (seven commands per node), a refused attempt at the gate by the worker that released and asks again, and the gate's grant, which names its client and so takes acquire.lua's path with its counter write."},
	}

	w("### Against the targets\n\n")
	w("The Redis backends' targets, judged on this run's medians: a limit is a figure of its own, or a ratio to another ")
	w("library's figure in the same run, named beside it.\n\n")
	w("| Target | distlock | limit | met |\n|---|---:|---|---|\n")
	var missed []target
	for _, t := range ts {
		if !t.measured() {
			w("| %s | – | – | not measured |\n", t.name)
			continue
		}
		format := t.format
		if t.count && !t.met() && format(t.got) == format(t.ref*t.limit) {
			format = num(2)
		}
		limit := format(t.ref) // a figure of its own
		if t.against != "" {
			limit = ratioFmt(t.limit) + " " + limit
		}
		if t.higher {
			limit = "≥ " + limit
		} else {
			limit = "≤ " + limit
		}
		verdict := "yes"
		if !t.met() {
			verdict = "**no**"
			missed = append(missed, t)
		}
		if t.against != "" {
			limit += " (" + t.against + ")"
		}
		w("| %s | %s | %s | %s |\n", t.name, format(t.got), limit, verdict)
	}
	w("\n")
	if len(missed) > 0 {
		w("Where a target is missed, the cause as measured:\n\n")
		seen := map[string]bool{}
		for _, t := range missed {
			if t.cause == "" || seen[t.cause] {
				continue
			}
			seen[t.cause] = true
			w("- **%s**: %s\n", t.name, t.cause)
		}
		w("\n")
	}
}
