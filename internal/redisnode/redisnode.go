// Package redisnode holds the lock operations on one Redis node — the Lua
// scripts, the key layout and the shared release subscription — used by
// both redislock (one deployment) and redlock (N independent masters).
//
// The scripts are one table (scripts.go): each row names the script's keys
// and arguments, which its Lua body reads by those names, and the shared
// helpers it is built from. FORMAT.md describes every key and value the
// scripts store.
package redisnode

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock/driver"
)

// Keys are the Redis names of one lock, and the settings of the scripts
// that grant it (see [Guard]). They share a hash slot, so the scripts work
// on Redis Cluster. FORMAT.md describes what each holds.
type Keys struct {
	Name    string // the lock's name, as the caller gave it
	Lock    string // a lease, "owner\nfence\nsince-ms\ndescription" with the lease as its TTL, or the free record its release leaves (FORMAT.md)
	Fence   string // the fencing counter, when a token needs it; expires once the clock floor has passed it (see token.lua)
	Guard   string // the restart guard's marker, shared by the locks of a prefix (of a hash slot, on Cluster)
	Channel string // published to on release
	Queue   string // fair waiters by arrival (sorted set)
	Places  string // fair waiters' deadlines (hash)
	Permits string // a semaphore's holders by lease expiry (sorted set)
	Tokens  string // a semaphore's holders' fencing tokens, and its size (hash)
	Readers string // a read-write lock's readers by lease expiry (sorted set)
	RTokens string // their fencing tokens (hash)
	Writing string // the writer waiting for the readers to leave
	Holds   string // a re-entrant lease's holds (hash: owner -> 1)
	Waiters string // the clients whose plain waiters a release may wake, one at a time (sorted set)
	// PermitReceipts, ReadReceipts and HoldReceipts name the releases of
	// permits, of readers and of a re-entrant lease's holds (sorted sets by
	// expiry), so that the same call sent again after a lost reply knows it
	// released. A release of the lock itself leaves its receipt in the lock
	// key (see FORMAT.md).
	PermitReceipts string
	ReadReceipts   string
	HoldReceipts   string
	boxes          [][]any // by script id: the script's keys (see scripts.go), boxed once
	channel        any     // Channel, boxed once
	grant          any     // the guard's argument, last on every script that grants
}

// of returns the keys of script s, boxed as command arguments.
func (k *Keys) of(s *script) []any { return k.boxes[s.id] }

// list returns the keys of script s, for go-redis' own script calls.
func (k *Keys) list(s *script) []string {
	out := make([]string, len(k.boxes[s.id]))
	for i, v := range k.boxes[s.id] {
		out[i] = v.(string)
	}
	return out
}

// KeysFor returns the keys of the lock named name under prefix, for
// scripts without a restart guard that floor tokens at the server clock to
// the µs. The name goes into a {hash tag}; a name with braces of its own,
// which would cut the tag short, is tagged by its hash instead.
func KeysFor(prefix, name string) Keys {
	return keysFor(prefix, name, Guard{}, noGuard)
}

func keysFor(prefix, name string, g Guard, grant any) Keys {
	var base string
	if strings.ContainsAny(name, "{}") {
		base = prefix + "{#" + nameHash(name) + "}" + name
	} else {
		base = prefix + "{" + name + "}"
	}
	k := Keys{Name: name, Lock: base, Fence: base + ":fence", Channel: base + channelSuffix, Queue: base + ":queue", Places: base + ":places"}
	k.Guard = markerName(prefix, k.Lock, g.Cluster)
	k.Readers, k.RTokens, k.Writing = base+":readers", base+":rtokens", base+":writing"
	k.PermitReceipts, k.ReadReceipts = base+":receipts", base+":rreceipts"
	k.Holds, k.HoldReceipts = base+":holds", base+":hreceipts"
	k.Permits, k.Tokens = base+":permits", base+":tokens"
	k.Waiters = base + waitersSuffix
	names := [numKeys]any{kLock: k.Lock, kFence: k.Fence, kGuard: k.Guard, kQueue: k.Queue, kPlaces: k.Places,
		kHolds: k.Holds, kHoldReceipts: k.HoldReceipts, kWriting: k.Writing,
		kReaders: k.Readers, kRTokens: k.RTokens, kReadReceipts: k.ReadReceipts,
		kPermits: k.Permits, kTokens: k.Tokens, kPermitReceipts: k.PermitReceipts, kWaiters: k.Waiters}
	n := 0
	for _, s := range scripts {
		n += len(s.keys)
	}
	all := make([]any, 0, n)
	k.boxes = make([][]any, len(scripts))
	for _, s := range scripts {
		from := len(all)
		for _, b := range s.keys {
			all = append(all, names[b.key])
		}
		k.boxes[s.id] = all[from:len(all):len(all)]
	}
	k.channel = k.Channel
	k.grant = grant
	return k
}

// The suffixes of a lock's channel and waiters, after its key.
const (
	channelSuffix = ":released"
	waitersSuffix = ":waiters"
)

// KeyCache remembers the Keys of recently used names, so that the hot path
// does not build and box the same strings on every call.
type KeyCache struct {
	prefix string
	guard  Guard
	grant  any
	mu     sync.RWMutex
	m      map[string]Keys
}

// keyCacheSize bounds a KeyCache; past it the cache starts afresh.
const keyCacheSize = 4096

// NewKeyCache returns a cache of the keys under prefix, for scripts that
// grant with guard g.
func NewKeyCache(prefix string, g Guard) *KeyCache {
	return &KeyCache{prefix: prefix, guard: g, grant: g.boxed(), m: make(map[string]Keys)}
}

// Get returns the keys of the lock named name (see [KeysFor]).
func (c *KeyCache) Get(name string) Keys {
	c.mu.RLock()
	k, ok := c.m[name]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = keysFor(c.prefix, name, c.guard, c.grant)
	c.mu.Lock()
	if len(c.m) >= keyCacheSize {
		c.m = make(map[string]Keys)
	}
	c.m[name] = k
	c.mu.Unlock()
	return k
}

// Describe encodes holder metadata for the lock value: one "k=v" per line,
// keys sorted. Newlines in values are replaced so the layout holds. The
// last map seen is remembered: callers pass the same read-only map on every
// acquisition, so the encoding is done once.
func Describe(meta map[string]string) string {
	if len(meta) == 0 {
		return ""
	}
	id := reflect.ValueOf(meta).UnsafePointer()
	if last := lastDesc.Load(); last != nil && last.id == id {
		return last.text
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if k != kindKey { // reserved for the writer's mark (see kind.lua)
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(clean(k))
		b.WriteByte('=')
		b.WriteString(clean(meta[k]))
	}
	text := b.String()
	lastDesc.Store(&described{id: id, text: text, boxed: text})
	return text
}

// kindKey marks, as the last line of its description, the holder of a
// read-write lock's write side, which a mutex's holder looks like
// otherwise; the write script adds it (WRITER in kind.lua).
const kindKey = "distlock.kind"

type described struct {
	id    unsafe.Pointer
	text  string
	boxed any
}

// boxDesc returns desc as a command argument, boxed once when it is the
// description last made by Describe.
func boxDesc(desc string) any {
	if last := lastDesc.Load(); last != nil && last.text == desc {
		return last.boxed
	}
	return desc
}

// boxMillis returns ttl in milliseconds as a command argument, boxed once
// for the TTL last used: a client uses one or two TTLs.
func boxMillis(ttl time.Duration) any {
	ms := ttl.Milliseconds()
	if last := lastTTL.Load(); last != nil && last.ms == ms {
		return last.boxed
	}
	b := &boxedMillis{ms: ms, boxed: ms}
	lastTTL.Store(b)
	return b.boxed
}

type boxedMillis struct {
	ms    int64
	boxed any
}

var lastTTL atomic.Pointer[boxedMillis]

// boxOwner returns owner as a command argument, boxed once for the owner
// last boxed: a holding's release and renewals name the owner its
// acquisition boxed.
func boxOwner(owner string) any { return boxLast(&lastOwner, owner) }

// boxLast returns s as a command argument: the boxed string that last
// holds, if it is s, else s boxed afresh and kept there.
func boxLast(last *atomic.Value, s string) any {
	if v := last.Load(); v != nil {
		if was, _ := v.(string); was == s {
			return v
		}
	}
	var v any = s
	last.Store(v)
	return v
}

// lastOwner holds the owner last boxed, as a boxed string.
var lastOwner atomic.Value

var lastDesc atomic.Pointer[described]

func clean(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Acquire runs the acquire script. It returns the fencing token when
// granted, or 0 and the holder's remaining TTL when not.
func Acquire(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc string) (token uint64, holderTTL time.Duration, err error) {
	return AcquireAs(ctx, c, k, owner, ttl, desc, "")
}

// AcquireAs is [Acquire] for a client whose notifier is subscribed to the
// lock's channel: a refused attempt enlists client (its [Notifier.ID]) as
// waiting, so that a release wakes that client alone, not every waiter.
// client "" enlists nobody; the release of a lease that refused such an
// attempt, and finds nobody enlisted, wakes every waiter. A client given
// as "+" and its id was named by a release since its last attempt: a
// grant to it is marked as waited for. A client given by [Yielding]
// yields: the attempt enlists it and is refused (0, 0) without looking at
// the lock.
func AcquireAs(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc, client string) (token uint64, holderTTL time.Duration, err error) {
	buf := argvs.Get().(*[]any)
	keys, args := k.of(acquireScript), []any{boxOwner(owner), boxMillis(ttl), boxDesc(desc), k.grant, boxClient(client)}
	if client == "" {
		// Enlisting nobody, the attempt leaves off waiters and client.
		keys, args = keys[:len(keys)-acquireScript.optKeys], args[:len(args)-acquireScript.optArgs]
	}
	token, holderTTL, err = grantOf(runIn(ctx, c, acquireScript, buf, keys, args), k, driver.Exclusive, 0)
	clear(*buf)
	argvs.Put(buf)
	return token, holderTTL, err
}

// AcquireCmd queues the acquire script on a pipeline; read it with
// [ReadGrant].
func AcquireCmd(ctx context.Context, p redis.Pipeliner, k Keys, owner string, ttl time.Duration, desc string) *redis.Cmd {
	keys := k.list(acquireScript)
	return acquireScript.EvalSha(ctx, p, keys[:len(keys)-acquireScript.optKeys], owner, ttl.Milliseconds(), desc, k.grant)
}

// AcquireFair runs the fair acquire script: granted only if no live waiter
// queued first; when not granted and place > 0, the owner joins the queue
// (or renews its place) for place. A stamp other than "" asks for the lock
// to be handed over by the release that makes it the owner's turn, with a
// message that quotes stamp (see [Notifier.TakeGrant]); the owner must
// then be watching the lock's channel. With reentry, the lock is taken as
// a re-entrant lease of that identity (see [AcquireReentrant]): its first
// hold waits its turn, and while it holds the lock, further holds are
// granted at once; such a request takes no grant handed over (stamp "").
func AcquireFair(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc string, place time.Duration, stamp, reentry string) (token uint64, holderTTL time.Duration, err error) {
	return grantOf(run(ctx, c, fairScript, k.of(fairScript), boxOwner(owner), boxMillis(ttl), boxDesc(desc), place.Milliseconds(), stamp, reentry, k.grant), k, driver.Exclusive, 0)
}

// AcquireFairCmd queues the fair acquire script on a pipeline.
func AcquireFairCmd(ctx context.Context, p redis.Pipeliner, k Keys, owner string, ttl time.Duration, desc string, place time.Duration, reentry string) *redis.Cmd {
	return fairScript.EvalSha(ctx, p, k.list(fairScript), owner, ttl.Milliseconds(), desc, place.Milliseconds(), "", reentry, k.grant)
}

// AcquireReentrant runs the re-entrant acquire script: the lock is granted
// as a lease of the identity reentry, or, while such a lease holds it, as
// one more hold with the lease's token. A hold ends by [Release]; the lease
// ends with its last hold. [Refresh] of any hold renews the lease for all,
// never shortening it while it has other holds.
func AcquireReentrant(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc, reentry string) (token uint64, holderTTL time.Duration, err error) {
	return grantOf(run(ctx, c, reentryScript, k.of(reentryScript), boxOwner(owner), boxMillis(ttl), boxDesc(desc), reentry, k.grant), k, driver.Exclusive, 0)
}

// AcquireReentrantCmd queues the re-entrant acquire script on a pipeline.
func AcquireReentrantCmd(ctx context.Context, p redis.Pipeliner, k Keys, owner string, ttl time.Duration, desc, reentry string) *redis.Cmd {
	return reentryScript.EvalSha(ctx, p, k.list(reentryScript), owner, ttl.Milliseconds(), desc, reentry, k.grant)
}

// Leave takes owner out of the fair queue and releases its lock if it holds it.
func Leave(ctx context.Context, c redis.Scripter, k Keys, owner string) error {
	return run(ctx, c, leaveScript, k.of(leaveScript), boxOwner(owner), k.channel).Err()
}

// LoadScripts loads every script on c, so that pipelined EVALSHA finds them.
func LoadScripts(ctx context.Context, c redis.Scripter) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Grant decodes an acquire script's numeric reply.
func Grant(n int64) (token uint64, holderTTL time.Duration, err error) {
	if n > 0 {
		return uint64(n), 0, nil
	}
	return 0, time.Duration(-n) * time.Millisecond, nil
}

// ReadGrant decodes the reply of a mutex's acquire script queued on a
// pipeline ([AcquireCmd], [AcquireFairCmd], [AcquireReentrantCmd]), as
// [Acquire] does.
func ReadGrant(cmd *redis.Cmd, k Keys) (token uint64, holderTTL time.Duration, err error) {
	return grantOf(cmd, k, driver.Exclusive, 0)
}

// grantOf decodes the reply of an acquire script for a request of kind
// asked (of limit permits, for a Permit): the token, or the wait, or, for
// a key held as another family of lock (see kind.lua), a
// [*driver.KindError] that names both.
func grantOf(cmd *redis.Cmd, k Keys, asked driver.Kind, limit int) (uint64, time.Duration, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, 0, err
	}
	switch v := v.(type) {
	case int64:
		return Grant(v)
	case string:
		if e := kindError(k.Name, v, asked, limit); e != nil {
			return 0, 0, e
		}
		if e := guardError(v); e != nil {
			return 0, 0, e
		}
	}
	return 0, 0, fmt.Errorf("redisnode: unexpected reply %v from an acquire script", v)
}

// GuardError is the error of an acquire script that the restart guard
// refused: nothing was taken, and no holder was in the way.
type GuardError struct {
	Wait time.Duration // until the guard lets grants through
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("redisnode: the restart guard holds new grants back for %v", e.Wait)
}

// guardError decodes the refusal "guard MS" (see token.lua), or returns
// nil for another reply.
func guardError(reply string) *GuardError {
	ms, ok := strings.CutPrefix(reply, "guard ")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return nil
	}
	return &GuardError{Wait: time.Duration(max(n, 1)) * time.Millisecond}
}

// kindError decodes the refusal "kind FAMILY [N]" of a request of kind
// asked, or returns nil for another reply.
func kindError(name, reply string, asked driver.Kind, limit int) *driver.KindError {
	f := strings.Fields(reply)
	if len(f) < 2 || f[0] != "kind" {
		return nil
	}
	e := &driver.KindError{Key: name, Asked: asked}
	if asked == driver.Permit {
		e.AskedLimit = limit
	}
	switch f[1] {
	case "mutex":
		e.Held = driver.Exclusive
	case "rw":
		e.Held = driver.Write
	case "permit":
		e.Held = driver.Permit
		if len(f) > 2 {
			e.HeldLimit, _ = strconv.Atoi(f[2])
		}
	default:
		return nil
	}
	return e
}

// AcquirePermit takes one of the n permits of the semaphore k names; it
// returns the token, or 0 and the time until the first permit expires.
func AcquirePermit(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, n int) (token uint64, wait time.Duration, err error) {
	return grantOf(run(ctx, c, permitScript, k.of(permitScript), boxOwner(owner), boxMillis(ttl), n, k.grant), k, driver.Permit, n)
}

// ReleasePermit gives owner's permit back: it reports whether owner held
// one. Like [Release], it recognises its own repeat after a lost reply.
func ReleasePermit(ctx context.Context, c redis.Scripter, k Keys, owner string) (bool, error) {
	v, err := run(ctx, c, releasePermitScript, k.of(releasePermitScript), boxOwner(owner), k.channel, receiptID, receiptMillis).Int64()
	return v == 1, err
}

// RefreshPermit extends owner's permit: it reports whether owner held one.
func RefreshPermit(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration) (bool, error) {
	v, err := run(ctx, c, refreshPermitScript, k.of(refreshPermitScript), boxOwner(owner), boxMillis(ttl)).Int64()
	return v == 1, err
}

// AcquireWrite takes a read-write lock for writing; with hold > 0, a writer
// kept out by readers holds new readers off for hold.
func AcquireWrite(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration, desc string, hold time.Duration) (token uint64, wait time.Duration, err error) {
	return grantOf(run(ctx, c, writeScript, k.of(writeScript), boxOwner(owner), boxMillis(ttl), boxDesc(desc), hold.Milliseconds(), k.grant), k, driver.Write, 0)
}

// AcquireRead takes a read-write lock for reading.
func AcquireRead(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration) (token uint64, wait time.Duration, err error) {
	return grantOf(run(ctx, c, readScript, k.of(readScript), boxOwner(owner), boxMillis(ttl), k.grant), k, driver.Read, 0)
}

// ReleaseRead ends owner's read lease: it reports whether owner held one.
// Like [Release], it recognises its own repeat after a lost reply.
func ReleaseRead(ctx context.Context, c redis.Scripter, k Keys, owner string) (bool, error) {
	v, err := run(ctx, c, releaseReadScript, k.of(releaseReadScript), boxOwner(owner), k.channel, receiptID, receiptMillis).Int64()
	return v == 1, err
}

// RefreshRead extends owner's read lease: it reports whether owner held one.
func RefreshRead(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration) (bool, error) {
	v, err := run(ctx, c, refreshReadScript, k.of(refreshReadScript), boxOwner(owner), boxMillis(ttl)).Int64()
	return v == 1, err
}

// Release runs the release script: it reports whether owner held the lock.
//
// A release leaves a receipt, in the free record it writes over the lease
// for [ReceiptTTL] and then in the next lease (see FORMAT.md), so that a
// repeat of it — the client's retry, or run's, after its reply was lost —
// reports the release it made rather than a lock it no longer finds.
// Receipts are per owner: an owner token names one holding, and is
// released once, so any release of it that finds its receipt is a repeat.
func Release(ctx context.Context, c redis.Scripter, k Keys, owner string) (bool, error) {
	return ReleaseWaking(ctx, c, k, owner, WakeNext)
}

// Wake says whom a release wakes, and how.
type Wake int

const (
	// WakeNext publishes the name of the oldest live fair waiter, whose
	// turn it is, or an empty message that wakes every waiter.
	WakeNext Wake = iota
	// WakeToken wakes every waiter with a message naming the released
	// lease's fencing token, so that a waiter that hears one release from
	// several nodes (Redlock) can tell it is the same release.
	WakeToken
	// WakeNone publishes nothing: the release of a grant that never made
	// a lock (a Redlock attempt short of a quorum), which frees nothing a
	// waiter could take, unless the grant refused an attempt on its node:
	// then as WakeToken, since that waiter waits for this release.
	WakeNone
)

var wakeArgs = [...]any{WakeNext: "", WakeToken: "t", WakeNone: "-"}

// GiveBack releases owner's grant of token, and only that grant: a later
// grant of the same owner (with another token, or, for a hold of a
// re-entrant lease, made after this give-back first ran) is not touched.
// call names this give-back, the same in each of its repeats, and in no
// other give-back of the owner: a repeat finds the receipt its first
// sending left and does nothing more.
func GiveBack(ctx context.Context, c redis.Scripter, k Keys, owner string, token uint64, call string) (bool, error) {
	// The lock's value begins "owner LF token LF": naming both as the
	// owner matches this grant and no later one (see release.lua).
	named := owner + "\n" + strconv.FormatUint(token, 10)
	n, err := run(ctx, c, releaseScript, k.of(releaseScript), named, k.channel, call, receiptMillis, wakeArgs[WakeNext], noClient, k.grant).Int64()
	return n != 0, err
}

// ReleaseWaking is [Release], waking the waiters as wake says.
func ReleaseWaking(ctx context.Context, c redis.Scripter, k Keys, owner string, wake Wake) (bool, error) {
	return releaseAs(ctx, c, k, owner, wake, noClient)
}

// ReleaseAs is [Release] by the client whose notifier's id is client
// ([Notifier.ID]). When the release woke another client by name, it
// returns the released lease's token as yield (else 0): this client
// should then yield to the woken one for a moment ([Yielding]) rather
// than take the lock back before it can ask.
func ReleaseAs(ctx context.Context, c redis.Scripter, k Keys, owner, client string) (released bool, yield uint64, err error) {
	n, err := releaseN(ctx, c, k, owner, WakeNext, boxClient(client))
	if n < 0 {
		return true, uint64(-n), err
	}
	return n == 1, 0, err
}

// Yielding returns the client argument of an attempt by the client client
// ([Notifier.ID]) on a lock whose lease of token it released a moment ago,
// waking another client by name ([ReleaseAs]): the attempt enlists the
// client, scored by token, and is refused, so that the woken one finds
// the lock free (see acquire.lua).
func Yielding(client string, token uint64) string {
	return "-" + strconv.FormatUint(token, 10) + " " + client
}

// boxClient returns client as a command argument, boxed once for the
// client last boxed: a process has a client or two.
func boxClient(client string) any {
	if client == "" {
		return noClient
	}
	return boxLast(&lastClient, client)
}

var lastClient atomic.Value

// noClient is the client argument of a release that names none.
var noClient any = ""

func releaseAs(ctx context.Context, c redis.Scripter, k Keys, owner string, wake Wake, client any) (bool, error) {
	n, err := releaseN(ctx, c, k, owner, wake, client)
	return n != 0, err
}

// releaseN runs the release script; its reply is 1 (or minus a token, see
// [ReleaseAs]) when released, 0 when not held.
func releaseN(ctx context.Context, c redis.Scripter, k Keys, owner string, wake Wake, client any) (int64, error) {
	buf := argvs.Get().(*[]any)
	n, err := runIn(ctx, c, releaseScript, buf, k.of(releaseScript), []any{boxOwner(owner), k.channel, receiptID, receiptMillis, wakeArgs[wake], client, k.grant}).Int64()
	clear(*buf)
	argvs.Put(buf)
	return n, err
}

// ReceiptTTL is how long a release's receipt lasts: longer than a client's
// retries of the call take (go-redis: up to 3 retries, each at most its
// ReadTimeout, 5s by default, when no context deadline cuts them short).
// The lock's free record lasts COUNTER_LIFE (prelude.lua), the same 10s.
const ReceiptTTL = 10 * time.Second

var receiptMillis any = ReceiptTTL.Milliseconds()

// receiptID goes where the scripts take a call id: one value for every
// call makes their receipts per owner (see Release).
var receiptID any = "r"

// Refresh runs the refresh script: it reports whether owner held the lock.
func Refresh(ctx context.Context, c redis.Scripter, k Keys, owner string, ttl time.Duration) (bool, error) {
	n, err := run(ctx, c, refreshScript, k.of(refreshScript), boxOwner(owner), boxMillis(ttl)).Int64()
	return n == 1, err
}

// Seed raises the fencing counter to at least token and returns its value.
// With reentry, it raises the token of that identity's re-entrant lease,
// if it holds the lock, to token too.
func Seed(ctx context.Context, c redis.Scripter, k Keys, token uint64, reentry string) (uint64, error) {
	n, err := run(ctx, c, seedScript, k.of(seedScript), strconv.FormatUint(token, 10), reentry, k.grant).Int64()
	return uint64(n), err
}

// State is the lock as one node sees it.
type State struct {
	Held   bool
	Writer bool // held by a read-write lock's writer
	Owner  string
	Token  uint64 // the holder's, or the last one issued when free
	Holds  int    // when Held: a re-entrant lease's holds, else 1
	TTL    time.Duration
	Meta   map[string]string // includes "since" (server ms) when held
}

// Inspect reads the lock's state without changing it.
func Inspect(ctx context.Context, c redis.Scripter, k Keys) (State, error) {
	vals, err := run(ctx, c, inspectScript, k.of(inspectScript)).Slice()
	if err != nil {
		return State{}, err
	}
	if len(vals) != 4 {
		return State{}, fmt.Errorf("redisnode: inspect: unexpected reply %v", vals)
	}
	var st State
	if s, ok := vals[2].(string); ok {
		st.Token, _ = strconv.ParseUint(s, 10, 64)
	}
	v, ok := vals[0].(string)
	if !ok {
		return st, nil
	}
	st.Held = true
	st.Holds = 1
	if n, ok := vals[3].(int64); ok && n > 0 {
		st.Holds = int(n)
	}
	if ms, ok := vals[1].(int64); ok && ms > 0 {
		st.TTL = time.Duration(ms) * time.Millisecond
	}
	lines := strings.Split(v, "\n")
	if len(lines) < 3 {
		return st, errors.New("redisnode: inspect: lock value is not distlock's")
	}
	st.Owner = lines[0] // for a re-entrant lease: '*' and its identity
	st.Token, _ = strconv.ParseUint(lines[1], 10, 64)
	since, _, _ := strings.Cut(lines[2], " ") // then the receipt it carries, if any
	st.Meta = map[string]string{"since": since}
	for _, kv := range lines[3:] {
		switch k, v, ok := strings.Cut(kv, "="); {
		case k == kindKey:
			st.Writer = v == "write"
		case ok:
			st.Meta[k] = v
		}
	}
	return st, nil
}

// Leases are the live leases of a read-write lock's readers or of a
// semaphore's permits, as one node sees them.
type Leases struct {
	Count  int
	Newest uint64        // the highest fencing token among them
	TTL    time.Duration // the longest remaining lease
	Limit  int           // a semaphore's size (0: unknown)
}

// limitField is the field of a semaphore's token hash that holds its size
// (LIMIT in kind.lua).
const limitField = "\nlimit"

// InspectLeases reads the live readers and permits of k on the node that
// holds k, in one transaction, without changing them.
func InspectLeases(ctx context.Context, c redis.UniversalClient, k Keys) (readers, permits Leases, err error) {
	node := redis.Cmdable(c)
	if cc, ok := c.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, k.Lock)
		if err != nil {
			return Leases{}, Leases{}, err
		}
		node = m
	}
	var now *redis.TimeCmd
	var sets [2]*redis.ZSliceCmd
	var tokens [2]*redis.MapStringStringCmd
	_, err = node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		for i, kk := range [2][2]string{{k.Readers, k.RTokens}, {k.Permits, k.Tokens}} {
			sets[i] = p.ZRangeWithScores(ctx, kk[0], 0, -1)
			tokens[i] = p.HGetAll(ctx, kk[1])
		}
		return nil
	})
	if err != nil {
		return Leases{}, Leases{}, err
	}
	nowMs := now.Val().UnixMilli()
	var ls [2]Leases
	for i := range ls {
		for _, z := range sets[i].Val() {
			left := int64(z.Score) - nowMs
			if left <= 0 {
				continue // lapsed; the next script drops it
			}
			owner, _ := z.Member.(string)
			token, _ := strconv.ParseUint(tokens[i].Val()[owner], 10, 64)
			ls[i].Count++
			ls[i].Newest = max(ls[i].Newest, token)
			ls[i].TTL = max(ls[i].TTL, time.Duration(left)*time.Millisecond)
		}
		if ls[i].Count > 0 {
			ls[i].Limit, _ = strconv.Atoi(tokens[i].Val()[limitField])
		}
	}
	return ls[0], ls[1], nil
}

// IsNoScript reports whether err is Redis' NOSCRIPT error.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// processor is what go-redis clients and pipelines have beyond Scripter.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// run calls script s with keys (boxed) and args, by EVALSHA with the EVAL
// fallback on NOSCRIPT, building the command from pre-boxed keys: go-redis'
// Script.Run would box every key and argument again per call. A call with
// other numbers of keys or arguments than the script's row names (see
// scripts.go) fails without being sent.
func run(ctx context.Context, c redis.Scripter, s *script, keys []any, args ...any) *redis.Cmd {
	return runIn(ctx, c, s, nil, keys, args)
}

// argvs keeps the argument lists of the commands of the uncontended
// acquire and release (see runIn).
var argvs = sync.Pool{New: func() any { return new([]any) }}

// runIn is run, building the command's argument list in *buf when buf is
// not nil, so that the list can be used again (argvs) once the caller has
// read the reply: go-redis holds a command's arguments only while it sends
// it.
func runIn(ctx context.Context, c redis.Scripter, s *script, buf *[]any, keys, args []any) *redis.Cmd {
	short := (s.optKeys > 0 || s.optArgs > 0) && len(keys) == len(s.keys)-s.optKeys && len(args) == len(s.args)-s.optArgs
	if !short && (len(keys) != len(s.keys) || len(args) != len(s.args)) {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("redisnode: script %s takes %d keys and %d arguments, not %d and %d", s.name, len(s.keys), len(s.args), len(keys), len(args)))
		return cmd
	}
	p, ok := c.(processor)
	if !ok {
		list := make([]string, len(keys))
		for i, k := range keys {
			list[i] = k.(string)
		}
		// A copy: go-redis keeps the arguments, and args must not escape,
		// so that the callers' argument lists stay off the heap.
		return s.Run(ctx, c, list, slices.Clone(args)...)
	}
	var argv []any
	if buf != nil {
		argv = (*buf)[:0]
	}
	if cap(argv) < 3+len(keys)+len(args) {
		argv = make([]any, 0, 3+len(keys)+len(args))
	}
	argv = append(argv, "evalsha", s.sha, len(keys))
	argv = append(argv, keys...)
	argv = append(argv, args...)
	if buf != nil {
		*buf = argv
	}
	cmd := process(ctx, p, argv)
	if IsNoScript(cmd.Err()) {
		argv[0], argv[1] = "eval", s.src
		cmd = process(ctx, p, argv)
	}
	return cmd
}

// process sends a command, and sends it once more, on another connection,
// if the connection broke before the reply came while ctx still has time.
// Every script is safe to repeat: acquisitions are idempotent per owner,
// releases per call (receipts), and a renewal repeated is a renewal. This
// keeps a lost reply from surfacing as an error on clients that do not
// retry (MaxRetries: -1, as recommended); a client that does has already
// retried.
//
// If the repeat fails too, the error is the first one, the repeat's noted
// in its text: the first request may have reached the server, which the
// repeat's error (say, a refused dial) must not be taken to deny.
func process(ctx context.Context, p processor, argv []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, argv...)
	_ = p.Process(ctx, cmd)
	first := cmd.Err()
	if !brokenConn(first) || ctx.Err() != nil {
		return cmd
	}
	cmd = redis.NewCmd(ctx, argv...)
	if err := p.Process(ctx, cmd); err != nil && !isServerReply(err) {
		cmd.SetErr(fmt.Errorf("%w (sent again: %v)", first, err))
	}
	return cmd
}

// brokenConn reports whether err says the connection failed after the
// command was written, before its reply was read.
func brokenConn(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// isServerReply reports whether err is a reply of the server (NOSCRIPT, a
// script error, nil), as opposed to a failure to reach it.
func isServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// NeverSent reports whether err proves that a request never reached the
// server: the connection could not even be made.
func NeverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
