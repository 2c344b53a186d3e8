package redisnode

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts, in one table. Each names its keys and arguments here, in
// the order it takes them; the Lua source gets a first line that binds
// them to locals of those names (see header), so a script's body reads
// "lock" and "owner", never KEYS[1] or ARGV[1]. To add a script: write its
// body in lua/, embed it below, and give it a row here with the helpers it
// uses. FORMAT.md describes what every key holds.
//
// A script's helpers are Lua closures, built afresh on every run, which
// costs the server more than the commands of an uncontended lock do. So a
// script that takes helpers gets prelude.lua first, which is small, and
// may begin with a fast path that needs nothing more: the lines of its
// body above the line "--[[helpers]]" come before the helpers, the rest
// after them.
var (
	acquireScript = define(spec{
		name: "acquire", body: acquireSrc, libs: []string{tokenLib, kindLib},
		keys:    []binding{{"lock", kLock}, {"counter", kFence}, {"marker", kGuard}, {"waiters", kWaiters}},
		args:    []string{"owner", "ttl", "desc", "guard", "client"},
		optKeys: 1, optArgs: 1,
	})
	// Redlock's acquire is acquire.lua behind a fast path of its own, on
	// the same keys and arguments.
	redlockAcquireScript = define(spec{
		name: "redlock_acquire", body: redlockAcquireSrc + acquireSrc, libs: acquireScript.libs,
		keys: acquireScript.keys, args: acquireScript.args, optKeys: acquireScript.optKeys, optArgs: acquireScript.optArgs,
	})
	releaseScript = define(spec{
		name: "release", body: releaseSrc, libs: []string{tokenLib, kindLib, queueLib},
		keys: []binding{
			{"lock", kLock}, {"queue", kQueue}, {"places", kPlaces}, {"writing", kWriting},
			{"holds", kHolds}, {"hold_receipts", kHoldReceipts}, {"counter", kFence}, {"marker", kGuard},
			{"waiters", kWaiters},
		},
		args: []string{"owner", "channel", "call", "receipt_life", "wake", "client", "guard"},
	})
	// A client named by a release's wake-up that has no waiter left for
	// the lock passes the wake-up on (see Notifier).
	passScript = define(spec{
		name: "pass", body: passSrc, libs: []string{tokenLib},
		keys: []binding{{"lock", kLock}, {"waiters", kWaiters}},
		args: []string{"channel", "client"},
	})
	refreshScript = define(spec{
		name: "refresh", body: refreshSrc,
		keys: []binding{{"lock", kLock}, {"holds", kHolds}},
		args: []string{"owner", "ttl"},
	})
	inspectScript = define(spec{
		name: "inspect", body: inspectSrc, libs: []string{tokenLib},
		keys: []binding{{"lock", kLock}, {"holds", kHolds}, {"counter", kFence}},
	})
	seedScript = define(spec{
		name: "seed", body: seedSrc, libs: []string{tokenLib},
		keys: []binding{{"counter", kFence}, {"lock", kLock}},
		args: []string{"token", "reentry", "guard"},
	})
	fairScript = define(spec{
		name: "acquire_fair", body: acquireFairSrc, libs: []string{tokenLib, kindLib, holdsLib, queueLib},
		keys: []binding{
			{"lock", kLock}, {"counter", kFence}, {"queue", kQueue}, {"places", kPlaces},
			{"marker", kGuard}, {"holds", kHolds},
		},
		args: []string{"owner", "ttl", "desc", "place", "stamp", "reentry", "guard"},
	})
	leaveScript = define(spec{
		name: "leave", body: leaveSrc, libs: []string{tokenLib, queueLib},
		keys: []binding{{"lock", kLock}, {"queue", kQueue}, {"places", kPlaces}},
		args: []string{"owner", "channel"},
	})
	permitScript = define(spec{
		name: "acquire_permit", body: acquirePermitSrc, libs: []string{tokenLib, kindLib, permitLib},
		keys: []binding{{"permits", kPermits}, {"tokens", kTokens}, {"counter", kFence}, {"marker", kGuard}},
		args: []string{"owner", "ttl", "n", "guard"},
	})
	// A permit's and a reader's release are one script on two sets of keys.
	releasePermitScript = define(spec{
		name: "release_permit", body: releasePermitSrc, libs: []string{tokenLib, permitLib},
		keys: []binding{{"leases", kPermits}, {"tokens", kTokens}, {"receipts", kPermitReceipts}},
		args: []string{"owner", "channel", "call", "receipt_life"},
	})
	releaseReadScript = define(spec{
		name: "release_read", body: releasePermitSrc, libs: []string{tokenLib, permitLib},
		keys: []binding{{"leases", kReaders}, {"tokens", kRTokens}, {"receipts", kReadReceipts}},
		args: []string{"owner", "channel", "call", "receipt_life"},
	})
	refreshPermitScript = define(spec{
		name: "refresh_permit", body: refreshPermitSrc, libs: []string{tokenLib, permitLib},
		keys: []binding{{"leases", kPermits}, {"tokens", kTokens}},
		args: []string{"owner", "ttl"},
	})
	refreshReadScript = define(spec{
		name: "refresh_read", body: refreshPermitSrc, libs: []string{tokenLib, permitLib},
		keys: []binding{{"leases", kReaders}, {"tokens", kRTokens}},
		args: []string{"owner", "ttl"},
	})
	writeScript = define(spec{
		name: "acquire_write", body: acquireWriteSrc, libs: []string{tokenLib, kindLib, permitLib},
		keys: []binding{
			{"lock", kLock}, {"counter", kFence}, {"readers", kReaders}, {"rtokens", kRTokens},
			{"writing", kWriting}, {"marker", kGuard},
		},
		args: []string{"owner", "ttl", "desc", "hold", "guard"},
	})
	readScript = define(spec{
		name: "acquire_read", body: acquireReadSrc, libs: []string{tokenLib, kindLib, permitLib},
		keys: []binding{
			{"lock", kLock}, {"counter", kFence}, {"readers", kReaders}, {"rtokens", kRTokens},
			{"writing", kWriting}, {"marker", kGuard},
		},
		args: []string{"owner", "ttl", "guard"},
	})
	reentryScript = define(spec{
		name: "acquire_reentrant", body: acquireReentrantSrc, libs: []string{tokenLib, kindLib, holdsLib},
		keys: []binding{{"lock", kLock}, {"counter", kFence}, {"marker", kGuard}, {"holds", kHolds}},
		args: []string{"owner", "ttl", "desc", "reentry", "guard"},
	})
	breakScript = define(spec{
		name: "break", body: breakSrc, libs: []string{tokenLib, queueLib},
		keys: []binding{
			{"lock", kLock}, {"holds", kHolds}, {"readers", kReaders}, {"rtokens", kRTokens},
			{"permits", kPermits}, {"tokens", kTokens}, {"queue", kQueue}, {"places", kPlaces},
		},
		args: []string{"channel"},
	})
	guardWait = define(spec{
		name: "guard_wait", body: guardWaitSrc,
		keys: []binding{{"counter", kFence}, {"marker", kGuard}},
		args: []string{"guard"},
	})
	// declareFresh's marker is the prefix's, or a slot's (see DeclareFresh),
	// not a lock's: it is run with its key given.
	declareFresh = define(spec{
		name: "declare_fresh", body: declareFreshSrc,
		keys: []binding{{"marker", kGuard}},
	})
)

var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/redlock_acquire.lua
	redlockAcquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/pass.lua
	passSrc string
	//go:embed lua/refresh.lua
	refreshSrc string
	//go:embed lua/inspect.lua
	inspectSrc string
	//go:embed lua/seed.lua
	seedSrc string
	//go:embed lua/acquire_fair.lua
	acquireFairSrc string
	//go:embed lua/leave.lua
	leaveSrc string
	//go:embed lua/acquire_permit.lua
	acquirePermitSrc string
	//go:embed lua/release_permit.lua
	releasePermitSrc string
	//go:embed lua/refresh_permit.lua
	refreshPermitSrc string
	//go:embed lua/acquire_write.lua
	acquireWriteSrc string
	//go:embed lua/acquire_read.lua
	acquireReadSrc string
	//go:embed lua/acquire_reentrant.lua
	acquireReentrantSrc string
	//go:embed lua/break.lua
	breakSrc string
	//go:embed lua/declare_fresh.lua
	declareFreshSrc string
	//go:embed lua/guard_wait.lua
	guardWaitSrc string

	// The shared helpers, prepended to the scripts that use them (in the
	// order libs gives), after the prelude and the script's fast path: the
	// clock, tokens and the restart guard; the families of locks; the
	// re-entrant holds; the fair queue; leases in sorted sets (permits and
	// readers).
	//go:embed lua/prelude.lua
	preludeLib string
	//go:embed lua/token.lua
	tokenLib string
	//go:embed lua/kind.lua
	kindLib string
	//go:embed lua/holds.lua
	holdsLib string
	//go:embed lua/queue.lua
	queueLib string
	//go:embed lua/permit.lua
	permitLib string
)

// keyName names one of a lock's keys (see Keys).
type keyName uint8

const (
	kLock keyName = iota
	kFence
	kGuard
	kQueue
	kPlaces
	kHolds
	kHoldReceipts
	kWriting
	kReaders
	kRTokens
	kReadReceipts
	kPermits
	kTokens
	kPermitReceipts
	kWaiters
	numKeys
)

// binding is one of a script's keys: the local its Lua names it by, and
// which of the lock's keys it is.
type binding struct {
	local string
	key   keyName
}

// spec is one row of the script table.
type spec struct {
	name string
	body string    // the script's own source, in lua/
	libs []string  // helpers prepended to it
	keys []binding // its KEYS, in order
	args []string  // the Lua names of its ARGV, in order
	// optKeys and optArgs: the last optKeys keys and the last optArgs
	// arguments may be left off, all together (the Lua names them nil
	// then).
	optKeys, optArgs int
}

// script is a Lua script with its source and SHA boxed once for the hot
// path, and the row that made it.
type script struct {
	*redis.Script
	spec
	id       int // its index in scripts, and in Keys.boxes
	src, sha any
}

// scripts are the defined scripts, by id.
var scripts []*script

// helpersMark splits a script's body into its fast path, which runs
// before the helpers are built, and the rest.
const helpersMark = "--[[helpers]]\n"

// define makes the script of s: a line that binds the names of its keys
// and arguments; then, if it takes helpers, the prelude, the body's fast
// path (see helpersMark) and the helpers; then the (rest of the) body.
func define(s spec) *script {
	src := header(s) + s.body
	if len(s.libs) > 0 {
		fast, rest, ok := strings.Cut(s.body, helpersMark)
		if !ok {
			fast, rest = "", s.body
		}
		src = header(s) + preludeLib + fast + strings.Join(s.libs, "") + rest
	}
	rs := redis.NewScript(src)
	sc := &script{Script: rs, spec: s, id: len(scripts), src: src, sha: rs.Hash()}
	scripts = append(scripts, sc)
	return sc
}

// header returns the Lua line that binds s's key and argument names, as
// "local lock, counter, owner = KEYS[1], KEYS[2], ARGV[1]". It comes
// first; the helpers take what they need as parameters, and neither they
// nor the body may declare locals of these names.
func header(s spec) string {
	var names, vals []string
	for i, b := range s.keys {
		names, vals = append(names, b.local), append(vals, fmt.Sprintf("KEYS[%d]", i+1))
	}
	for i, a := range s.args {
		names, vals = append(names, a), append(vals, fmt.Sprintf("ARGV[%d]", i+1))
	}
	if len(names) == 0 {
		return ""
	}
	return "local " + strings.Join(names, ", ") + " = " + strings.Join(vals, ", ") + "\n"
}
