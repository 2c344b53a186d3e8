package zklock

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// A lock's line has one ephemeral sequential child per holding or waiter,
// named prefix-hash-sequence: the prefix says the kind (and a permit's,
// its semaphore's size: "s3" for one of 3), the hash names the owner (so
// that an attempt whose reply was lost finds its node again), and
// ZooKeeper appends the ten-digit sequence that orders the line. Every
// attempt lists the line, so the names tell it how the key is used.
var kindPrefix = map[driver.Kind]string{driver.Exclusive: "x", driver.Write: "w", driver.Read: "r", driver.Permit: "s"}

// reentrantPrefix starts the name of a re-entrant lease's node: a mutex
// node named by its re-entrant identity instead of an owner, and shared
// by that identity's holds.
const reentrantPrefix = "e"

// namePrefix is the start of the name of a node of req's kind, before the
// owner's hash.
func namePrefix(kind driver.Kind, limit int) string {
	if kind == driver.Permit {
		return kindPrefix[kind] + strconv.Itoa(limit)
	}
	return kindPrefix[kind]
}

// ownerHash names owner in node names without showing it: whoever knows
// an owner token can release its lock.
func ownerHash(owner string) string {
	var buf [64]byte
	sum := sha256.Sum256(append(append(buf[:0], "distlock-owner:"...), owner...))
	return hex.EncodeToString(sum[:12])
}

// reentryHash names a re-entrant identity in node names without showing
// it: whoever knows it can enter the lock.
func reentryHash(reentry string) string {
	sum := sha256.Sum256([]byte("distlock-reentry:" + reentry))
	return hex.EncodeToString(sum[:12])
}

// child is one parsed child name of a lock's line.
type child struct {
	name      string
	kind      driver.Kind
	limit     int  // a permit's semaphore size (0: unknown, a node named "s-")
	reentrant bool // a re-entrant lease's node: hash names its identity
	hash      string
	seq       int64
}

// parseChild parses a child name; ok is false for names of other schemes.
func parseChild(name string) (child, bool) {
	p, rest, ok := strings.Cut(name, "-")
	if !ok || len(rest) < 11 || p == "" {
		return child{}, false
	}
	kind, limit := driver.Kind(255), 0
	for k, s := range kindPrefix {
		if s == p {
			kind = k
		}
	}
	if n, err := strconv.Atoi(p[1:]); p[0] == kindPrefix[driver.Permit][0] && err == nil && n > 0 && p[1] != '0' {
		kind, limit = driver.Permit, n
	}
	reentrant := p == reentrantPrefix
	if reentrant {
		kind = driver.Exclusive
	}
	hash, seqs, ok := strings.Cut(rest, "-")
	seq, err := strconv.ParseInt(seqs, 10, 64)
	if kind == 255 || !ok || err != nil {
		return child{}, false
	}
	return child{name: name, kind: kind, limit: limit, reentrant: reentrant, hash: hash, seq: seq}, true
}

// line parses and sorts a lock's children by sequence: the order in which
// they queued.
func line(names []string) []child {
	kids := make([]child, 0, len(names))
	for _, n := range names {
		if c, ok := parseChild(n); ok {
			kids = append(kids, c)
		}
	}
	slices.SortFunc(kids, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	return kids
}

// find returns the index of the child of owner hash h, or -1.
func find(kids []child, h string) int {
	return slices.IndexFunc(kids, func(c child) bool { return c.hash == h && !c.reentrant })
}

// shares reports whether c and a request of kind and limit use the key
// the same way (see driver.Compatible); a permit of unknown size shares
// with every permit.
func (c child) shares(kind driver.Kind, limit int) bool {
	if c.kind == driver.Permit && kind == driver.Permit && c.limit == 0 {
		return true
	}
	return driver.Compatible(c.kind, c.limit, kind, limit)
}

// foreign returns the children of ahead that use the key another way than
// a request of kind and limit. ahead is the line before the request's own
// node (or the whole line when it has none): a node made earlier wins, so
// of two requests of different kinds made at once, the later one sees the
// earlier and is refused, and the earlier one, seeing nothing foreign
// ahead of it, goes on as usual.
func foreign(ahead []child, kind driver.Kind, limit int) []child {
	var fs []child
	for _, c := range ahead {
		if !c.shares(kind, limit) {
			fs = append(fs, c)
		}
	}
	return fs
}

// kindError is the error of a request refused for the foreign child c.
func kindError(req driver.Request, c child) *driver.KindError {
	e := &driver.KindError{Key: req.Key, Held: c.kind.Family(), Asked: req.Kind}
	if c.kind == driver.Permit {
		e.HeldLimit = c.limit
	}
	if req.Kind == driver.Permit {
		e.AskedLimit = req.Limit
	}
	return e
}

// blockers returns the children before kids[i] that keep it from holding
// its lock: every earlier child of a mutex or writer; the earlier writers
// of a reader; the earlier permits beyond limit-1 of a semaphore (all of
// them, since any one leaving frees a permit). The children before kids[i]
// are all of its family: a request checks that first (see foreign).
func blockers(kids []child, i int, limit int) []child {
	me := kids[i]
	switch me.kind {
	case driver.Read:
		var bs []child
		for _, c := range kids[:i] {
			if c.kind != driver.Read {
				bs = append(bs, c)
			}
		}
		return bs
	case driver.Permit:
		if i < limit {
			return nil
		}
		return kids[:i]
	default:
		return kids[:i]
	}
}

// holders returns the children that hold the lock now: the first, the
// readers before the first writer, or the first limit permits (each
// permit records its semaphore's limit). Nodes of another family than
// the first's, on their way out of the line, hold nothing.
func holders(kids []child, limit func(child) int) []child {
	if len(kids) == 0 {
		return nil
	}
	head := kids[0]
	kids = slices.DeleteFunc(slices.Clone(kids), func(c child) bool { return !c.shares(head.kind, head.limit) })
	switch head.kind {
	case driver.Read:
		i := slices.IndexFunc(kids, func(c child) bool { return c.kind != driver.Read })
		if i < 0 {
			i = len(kids)
		}
		return kids[:i]
	case driver.Permit:
		n := min(limit(head), len(kids))
		return kids[:max(n, 1)]
	default:
		return kids[:1]
	}
}

// nodeData is what a child node stores. Its lease (or a waiter's place)
// lapses Span after the node's last modification, on the clock of the
// ensemble's leader (the node's mtime).
//
// A re-entrant lease's node lists its holds and its waiters, by owner
// hash, each with its own lease (or place) length; its Span is the
// longest hold's (the longest place's while it has no hold).
type nodeData struct {
	Span  int64             `json:"span"`            // milliseconds
	Wait  int64             `json:"wait,omitempty"`  // ms: the place's length while not first, if shorter
	Held  bool              `json:"held,omitempty"`  // a granted holding, not a waiter
	Limit int               `json:"limit,omitempty"` // a permit's semaphore size
	Since int64             `json:"since,omitempty"` // unix ms of the grant
	Meta  map[string]string `json:"meta,omitempty"`
	Holds map[string]int64  `json:"holds,omitempty"` // a re-entrant lease's holds: owner hash to ms
	Waits map[string]int64  `json:"waits,omitempty"` // its waiters keeping a place: owner hash to ms
}

// lease is how long after its last write the node lapses: its Span if
// it is first in line, and while it waits, its Wait if that is shorter.
// A waiter's node made as a holding (in case it gets in at once) carries
// its place's length as Wait: no write is then needed when it must wait.
// Its owner trusts the shorter of the two from that write.
func (d nodeData) lease(first bool) int64 {
	if !first && d.Wait > 0 {
		return min(d.Span, d.Wait)
	}
	return d.Span
}

// settle recomputes a re-entrant lease's Span and Held from its holds
// and waiters.
func (d *nodeData) settle() {
	d.Held = len(d.Holds) > 0
	spans := d.Waits
	if d.Held {
		spans = d.Holds
	}
	d.Span = 0
	for _, s := range spans {
		d.Span = max(d.Span, s)
	}
}

// encode writes d as JSON. The fields of a plain holding or waiter are
// written by hand, and its Meta, the same map on every call of a client,
// is encoded once: json.Marshal would allocate a dozen times per call.
func (d nodeData) encode() []byte {
	if len(d.Holds) > 0 || len(d.Waits) > 0 {
		b, _ := json.Marshal(d) // a struct of plain fields: cannot fail
		return b
	}
	meta := encodeMeta(d.Meta)
	b := make([]byte, 0, 64+len(meta))
	b = strconv.AppendInt(append(b, `{"span":`...), d.Span, 10)
	if d.Wait != 0 {
		b = strconv.AppendInt(append(b, `,"wait":`...), d.Wait, 10)
	}
	if d.Held {
		b = append(b, `,"held":true`...)
	}
	if d.Limit != 0 {
		b = strconv.AppendInt(append(b, `,"limit":`...), int64(d.Limit), 10)
	}
	if d.Since != 0 {
		b = strconv.AppendInt(append(b, `,"since":`...), d.Since, 10)
	}
	if len(meta) > 0 {
		b = append(append(b, `,"meta":`...), meta...)
	}
	return append(b, '}')
}

// metaJSON is a Meta map and its JSON.
type metaJSON struct {
	m    map[string]string
	json []byte
}

// lastMeta is the Meta map encoded last.
var lastMeta atomic.Pointer[metaJSON]

// encodeMeta returns m as JSON (nil for an empty map), encoding it only
// if it is not the map encoded last: a request's Meta is read-only.
func encodeMeta(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	if c := lastMeta.Load(); c != nil && reflect.ValueOf(c.m).UnsafePointer() == reflect.ValueOf(m).UnsafePointer() {
		return c.json
	}
	js, _ := json.Marshal(m) // strings: cannot fail
	lastMeta.Store(&metaJSON{m: m, json: js})
	return js
}

func decodeData(b []byte) nodeData {
	var d nodeData
	_ = json.Unmarshal(b, &d) // a foreign or damaged node: zero span, lapsed
	return d
}

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// escapeKey turns a key into one znode name: bytes other than letters,
// digits, '_', ':' and '-' become %XX, so a key can never be ".", "..",
// contain '/' or collide with the clock node (which starts with '.').
func escapeKey(key string) string {
	const hexd = "0123456789ABCDEF"
	plain := true
	for i := 0; i < len(key) && plain; i++ {
		c := key[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '-'
	}
	if plain {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&15])
	}
	return b.String()
}
