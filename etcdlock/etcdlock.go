package etcdlock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// DefaultPrefix is put before every key the backend writes.
const DefaultPrefix = "distlock/"

// DefaultCallTimeout bounds one call of the backend (one attempt of
// Acquire, Release, Refresh, Inspect...) when [WithCallTimeout] is not
// given: the etcd client waits for a connection as long as its context
// lets it, and against a cluster out of reach a call must fail in time
// for the caller to act.
const DefaultCallTimeout = 5 * time.Second

// receiptTTL is how long, in seconds, the lease of release receipts is
// granted for; a new one is granted when it is half used, so a receipt
// lasts between receiptTTL/2 and receiptTTL.
const receiptTTL = 10

// beforeIssue, if set (by tests), is called with the owner's key by an
// attempt that found that key holding the lock, before the grant is
// issued.
var beforeIssue atomic.Pointer[func(key string)]

// Backend is a distlock backend on an etcd cluster. Its methods may be
// called concurrently. The methods of a nil *Backend, or of one on a nil
// client, return an error wrapping distlock.ErrInvalidBackend.
type Backend struct {
	cli         *clientv3.Client
	prefix      string
	drift       func(time.Duration) time.Duration
	ownClient   bool // opened from a URL: closed with the backend
	callTimeout time.Duration

	ctx    context.Context // ends with Close: keep-alives, watches
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool             // by Close: no goroutine starts after it
	leases    map[int64]*lease // by TTL in seconds
	receipts  *lease
	granted   time.Time            // of receipts
	deadlines map[string]*deadline // by etcd key (see hold.go)
	reholds   map[string]string    // re-entrant hold key -> its anchor (see reentry.go)
	spares    map[int64]*lease     // by TTL in seconds: for a new re-entrant lease
}

var _ driver.Backend = (*Backend)(nil)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key the backend writes
// (default [DefaultPrefix]). Clients that share locks use the same prefix.
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithDrift sets the clock drift allowance subtracted from a lease's TTL to
// get its local validity (default driver.DefaultDrift: 1% + 2ms).
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) { b.drift = f }
}

// WithCallTimeout bounds each call of the backend (default
// [DefaultCallTimeout]), whatever the context passed to it: an Acquire or
// Refresh by the TTL too, if that is shorter, since a grant or renewal
// that comes after its TTL cannot be used. A call that times out returns
// an error wrapping context.DeadlineExceeded. Zero or less means the
// default.
func WithCallTimeout(d time.Duration) Option { return func(b *Backend) { b.callTimeout = d } }

// New returns a backend on cli. The caller keeps ownership of cli: Close
// stops the backend's keep-alives and watches, not cli, and does not
// release held locks (their leases run out).
func New(cli *clientv3.Client, opts ...Option) *Backend {
	b := &Backend{cli: cli, prefix: DefaultPrefix, drift: driver.DefaultDrift, leases: make(map[int64]*lease)}
	for _, opt := range opts {
		opt(b)
	}
	if b.drift == nil {
		b.drift = driver.DefaultDrift
	}
	if b.callTimeout <= 0 {
		b.callTimeout = DefaultCallTimeout
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// check fails on a backend that cannot work, or a closed one.
func (b *Backend) check() error {
	if b == nil || b.cli == nil {
		return errNilClient
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	return nil
}

// call bounds one call of the backend: by the call timeout, and by ttl if
// it is positive and shorter.
func (b *Backend) call(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	d := b.callTimeout
	if ttl > 0 && ttl < d {
		d = ttl
	}
	return context.WithTimeout(ctx, d)
}

// checkKey refuses a key or owner the backend cannot name (empty).
func checkKey(op, key, owner string, hasOwner bool) error {
	switch {
	case key == "":
		return fmt.Errorf("etcdlock: %s: empty key: %w", op, driver.ErrInvalidKey)
	case hasOwner && owner == "":
		return fmt.Errorf("etcdlock: %s %q: empty owner: %w", op, key, driver.ErrInvalidKey)
	}
	return nil
}

// Capabilities implements driver.Backend: releases are notified (a fair
// waiter only by the release of the key queued just before its own),
// fair locks, read-write locks, semaphores and re-entrant locks are
// offered. A re-entrant lock is not fair: a request with both Reentry
// and Fair fails with an error wrapping errors.ErrUnsupported.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// keys are the etcd keys of one lock key.
type keys struct {
	lock     string // prefix of every holding and waiter
	sub      string // prefix of the holdings of the request's kind
	own      string // the owner's
	receipt  string // the owner's receipt of its release
	last     string // written with a grant made in one step: its ModRevision is the token
	lastSlow string // the token of other grants, as 20 decimal digits
	holds    string // prefix of the holds of a re-entrant lease (see reentry.go)
	hold     string // the owner's hold of a re-entrant lease
}

func (b *Backend) keys(key, owner string, kind driver.Kind) keys {
	k := url.PathEscape(key)
	lock := b.prefix + "lock/" + k + "/"
	sub := lock + subprefix(kind)
	holds := b.prefix + "hold/" + k + "/"
	return keys{
		lock:     lock,
		sub:      sub,
		own:      sub + url.PathEscape(owner),
		receipt:  b.prefix + "released/" + k + "/" + url.PathEscape(owner),
		last:     b.prefix + "token/" + k + "/1",
		lastSlow: b.prefix + "token/" + k + "/2",
		holds:    holds,
		hold:     holds + url.PathEscape(owner),
	}
}

// subprefix separates the kinds: readers look for writers only, and
// Release knows which kinds wait in line.
func subprefix(kind driver.Kind) string {
	switch kind {
	case driver.Read:
		return "r/"
	case driver.Permit:
		return "p/"
	}
	return "w/" // Exclusive and Write: a key has one or the other
}

// holding is the value of an owner's key.
type holding struct {
	Kind  driver.Kind       `json:"kind"`
	Since int64             `json:"since"` // unix ms
	Meta  map[string]string `json:"meta,omitempty"`
}

// Acquire implements driver.Backend. An attempt that is not granted leaves
// nothing behind, unless it waits in line (req.Queue > 0, for a fair lock
// or a writer): its key then keeps its place, until it is granted or the
// owner releases it. The key's local deadline is armed before the attempt
// is sent, so a key whose reply was lost ends at its TTL (see the package
// doc) even if the owner never asks again.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := b.checkRequest(req); err != nil {
		return driver.Grant{}, err
	}
	ctx, cancel := b.call(ctx, req.TTL)
	defer cancel()
	start := time.Now()
	if req.Reentry != "" {
		return b.acquireReentrant(ctx, req, start)
	}
	if err := b.arm(ctx, b.keys(req.Key, req.Owner, req.Kind).own, start.Add(max(req.TTL, req.Queue))); err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	for retried := false; ; retried = true {
		l, err := b.lease(ctx, seconds(req.TTL))
		if err != nil {
			return driver.Grant{}, err
		}
		g, err := b.acquire(ctx, req, l, start)
		if (errors.Is(err, errLeaseGone) || errors.Is(err, errKeyGone)) && !retried {
			continue // granted another lease, or a new key put, once
		}
		if err != nil || !g.Acquired {
			return g, err
		}
		if g.ValidFor, err = l.validFor(start, req.TTL, b.drift); err != nil {
			return driver.Grant{}, err
		}
		return g, nil
	}
}

func (b *Backend) checkRequest(req driver.Request) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := checkKey("acquire", req.Key, req.Owner, true); err != nil {
		return err
	}
	switch {
	case req.TTL <= 0:
		return fmt.Errorf("etcdlock: TTL %v is not positive", req.TTL)
	case req.Kind > driver.Permit:
		return fmt.Errorf("etcdlock: unknown lock kind %d", req.Kind)
	case req.Kind == driver.Permit && req.Limit < 1:
		return fmt.Errorf("etcdlock: a semaphore of %d permits", req.Limit)
	case req.Reentry != "" && (req.Kind != driver.Exclusive || req.Fair):
		return fmt.Errorf("etcdlock: re-entrant locks are exclusive and not fair: %w", errors.ErrUnsupported)
	}
	return nil
}

// acquire makes the attempt on lease l. A grant made in one step writes
// k.last in the same transaction, which makes its ModRevision the token.
func (b *Backend) acquire(ctx context.Context, req driver.Request, l *lease, start time.Time) (driver.Grant, error) {
	k := b.keys(req.Key, req.Owner, req.Kind)
	val, err := json.Marshal(holding{Kind: req.Kind, Since: time.Now().UnixMilli(), Meta: req.Meta})
	if err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: metadata: %w", err)
	}
	put := clientv3.OpPut(k.own, string(val), clientv3.WithLease(l.id))
	// Free for this request: nothing in the way at all, or for a reader,
	// no writer (held or waiting).
	free := clientv3.Compare(clientv3.CreateRevision(k.lock), "=", 0).WithPrefix()
	if req.Kind == driver.Read {
		free = clientv3.Compare(clientv3.CreateRevision(k.lock+"w/"), "=", 0).WithPrefix()
	}
	queue := req.Queue > 0 && (req.Kind == driver.Exclusive || req.Kind == driver.Write)
	first := clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{put, clientv3.OpPut(k.last, "")}, nil)
	switch {
	case queue:
		// Granted if free, else in line: the key is put either way, after
		// the check (one transaction may put a key only once).
		first = clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{clientv3.OpPut(k.last, "")}, nil)
	case req.Kind == driver.Permit:
		first = clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{put, clientv3.OpPut(k.last, "")},
			[]clientv3.Op{clientv3.OpGet(k.sub, clientv3.WithPrefix(), clientv3.WithCountOnly())})
	}
	then := []clientv3.Op{first}
	if queue {
		then = append(then, put)
	}
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", 0),
	).Then(then...).Else(
		clientv3.OpGet(k.own),
	).Commit()
	if err != nil {
		return driver.Grant{}, b.leaseErr(err, l, "acquire", req.Key)
	}
	if resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		rev := resp.Header.Revision
		switch {
		case inner.Succeeded:
			lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
			return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, nil
		case queue:
			b.setDeadline(k.own, rev, start.Add(req.Queue), nil) // in line
			return driver.Grant{}, nil
		case req.Kind == driver.Permit && inner.Responses[0].GetResponseRange().Count < int64(req.Limit):
			return b.acquirePermit(ctx, req, k, put, l, start)
		}
		b.forget(k.own) // the owner has no key: the transaction said so
		return driver.Grant{}, nil
	}
	// The owner has a key: a repeat of an attempt that took it, or a
	// waiter's next attempt.
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: the owner's key vanished during the attempt", req.Key)
	}
	return b.confirm(ctx, req, k, kvs[0], l, start)
}

// acquirePermit tries for a permit of a semaphore that has holders: it
// adds the owner's key on lease l, and takes it back if it is not among
// the first req.Limit. A key among them holds from the transaction that
// put it, before any key put later: its create revision is its token.
func (b *Backend) acquirePermit(ctx context.Context, req driver.Request, k keys, put clientv3.Op, l *lease, start time.Time) (driver.Grant, error) {
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", 0),
	).Then(put, firstHolders(k, req.Kind, req.Limit)).Else(
		clientv3.OpGet(k.own), firstHolders(k, req.Kind, req.Limit),
	).Commit()
	if err != nil {
		return driver.Grant{}, b.leaseErr(err, l, "acquire a permit of", req.Key)
	}
	rev, on := resp.Header.Revision, int64(l.id)
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire a permit of %q: the owner's key vanished during the attempt", req.Key)
		}
		rev, on = kvs[0].CreateRevision, kvs[0].Lease
	}
	if !granted(req.Kind, rev, resp.Responses[1].GetResponseRange().Kvs) {
		return b.giveBack(ctx, req, k, rev)
	}
	return b.issue(ctx, req, k, rev, on, l, start, false)
}

// giveBack deletes the owner's permit key, created at rev, which is not
// among the first req.Limit: permits do not wait in line.
func (b *Backend) giveBack(ctx context.Context, req driver.Request, k keys, rev int64) (driver.Grant, error) {
	_, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev)).Then(clientv3.OpDelete(k.own)).Commit()
	if err != nil {
		// The key stays until its deadline, armed by Acquire.
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire a permit of %q: give back the key past the first %d: %w", req.Key, req.Limit, err)
	}
	b.forget(k.own)
	return driver.Grant{}, nil
}

// confirm finishes an attempt of an owner whose key, kv, exists: it is
// granted if the key is first in line (for a permit, among the first
// req.Limit).
//
// The check is a read, and issue grants in a transaction of its own,
// applied only if the key still has kv's create revision: a key that
// holds keeps holding as long as it exists, since the keys put later are
// behind it, but it may end between the two (its lease expires, or a
// Break deletes it). The attempt then starts over.
//
// A permit's key may also be one that was never granted: left by an
// attempt that was refused and could not give it back, or whose reply
// was lost. Granted now, its create revision may be below the token of a
// permit granted meanwhile; it is then given back, and the attempt starts
// over with a new key (see issue).
func (b *Backend) confirm(ctx context.Context, req driver.Request, k keys, kv *mvccpb.KeyValue, l *lease, start time.Time) (driver.Grant, error) {
	rev := kv.CreateRevision
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev),
	).Then(
		firstHolders(k, req.Kind, req.Limit),
		clientv3.OpGet(k.last, clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	if !resp.Succeeded {
		b.vanished(k.own, rev)
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, errKeyGone)
	}
	// A permit's key was granted if it was put with the grant (k.last
	// written in the same transaction), or written again since, as issue
	// does with every permit it grants.
	last := resp.Responses[1].GetResponseRange().Kvs
	ungranted := req.Kind == driver.Permit && kv.ModRevision == rev && (len(last) == 0 || last[0].ModRevision != rev)
	if !granted(req.Kind, rev, resp.Responses[0].GetResponseRange().Kvs) {
		switch {
		case ungranted:
			return b.giveBack(ctx, req, k, rev)
		case req.Queue > 0:
			b.setDeadline(k.own, rev, start.Add(req.Queue), nil) // the place, renewed
		}
		return driver.Grant{}, nil
	}
	if f := beforeIssue.Load(); f != nil {
		(*f)(k.own)
	}
	// Granted now (a waiter's turn) or earlier (a repeat).
	return b.issue(ctx, req, k, rev, kv.Lease, l, start, ungranted)
}

// issue grants the owner's key, created at rev and on lease on, which
// holds the lock. In one transaction, applied only if the key still has
// that create revision, it notes rev, the token, as the key's last for
// Inspect (unless a greater one is), and puts the key on lease l if it is
// on another. A permit's key is written even if it is on l: its mod
// revision then tells a later attempt of its owner that it was granted.
//
// With ungranted, for a permit's key never granted before, the token
// would go back if a greater one was issued since the key was put; the
// transaction then deletes the key instead.
//
// The grant's deadline is set, and its Lost tied to l, only once the
// transaction is applied. If it is not, the key is gone: the error wraps
// errKeyGone.
func (b *Backend) issue(ctx context.Context, req driver.Request, k keys, rev, on int64, l *lease, start time.Time, ungranted bool) (driver.Grant, error) {
	digits := fmt.Sprintf("%020d", rev)
	note := clientv3.OpPut(k.lastSlow, digits)
	var write []clientv3.Op // the key, written again
	if req.Kind == driver.Permit || on != int64(l.id) {
		write = append(write, clientv3.OpPut(k.own, "", clientv3.WithIgnoreValue(), clientv3.WithLease(l.id)))
	}
	unset := clientv3.Compare(clientv3.CreateRevision(k.lastSlow), "=", 0)
	var then []clientv3.Op
	if ungranted {
		// No grant in one step since the key was put, and no token
		// above rev noted.
		before := clientv3.Compare(clientv3.ModRevision(k.last), "<", rev+1)
		notAbove := clientv3.Compare(clientv3.Value(k.lastSlow), "<", fmt.Sprintf("%020d", rev+1))
		set := append([]clientv3.Op{note}, write...)
		then = []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{before, unset}, set,
			[]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{before, notAbove}, set, []clientv3.Op{clientv3.OpDelete(k.own)})})}
	} else {
		below := clientv3.Compare(clientv3.Value(k.lastSlow), "<", digits)
		then = append([]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{unset}, []clientv3.Op{note},
			[]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{below}, []clientv3.Op{note}, nil)})}, write...)
	}
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev),
	).Then(then...).Commit()
	if err != nil {
		return driver.Grant{}, b.leaseErr(err, l, "acquire", req.Key)
	}
	gone := !resp.Succeeded
	if !gone && ungranted {
		// Neither branch that grants: the key was deleted.
		inner := resp.Responses[0].GetResponseTxn()
		gone = !inner.Succeeded && !inner.Responses[0].GetResponseTxn().Succeeded
	}
	if gone {
		b.vanished(k.own, rev)
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, errKeyGone)
	}
	lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
	return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, nil
}

// firstHolders reads, in line order, the keys that decide whether a
// request of kind is granted: the first key of all (a writer), the first
// writer (a reader), the first limit permits.
func firstHolders(k keys, kind driver.Kind, limit int) clientv3.Op {
	key := k.lock
	if kind == driver.Read {
		key = k.lock + "w/"
	}
	return clientv3.OpGet(key, firstOpts(k, kind, limit)...)
}

func firstOpts(_ keys, kind driver.Kind, limit int) []clientv3.OpOption {
	n := int64(1)
	if kind == driver.Permit {
		n = int64(limit)
	}
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(n)}
}

// granted reports whether the key created at rev holds the lock, given
// firstHolders' answer.
func granted(kind driver.Kind, rev int64, first []*mvccpb.KeyValue) bool {
	switch kind {
	case driver.Read:
		return len(first) == 0 || first[0].CreateRevision > rev
	case driver.Permit:
		return len(first) > 0 && first[len(first)-1].CreateRevision >= rev
	}
	return len(first) > 0 && first[0].CreateRevision == rev
}

// Release implements driver.Backend. A released holding leaves a receipt
// for a few seconds (5 to 10), so that a repeated Release reports success.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := checkKey("release", l.Key, l.Owner, true); err != nil {
		return err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	for retried := false; ; retried = true {
		rl, err := b.receiptLease(ctx)
		if err != nil {
			return err
		}
		err = b.release(ctx, l, rl)
		if err == nil || errors.Is(err, driver.ErrNotHeld) {
			k := b.keys(l.Key, l.Owner, l.Kind)
			b.forget(k.own)
			b.dropHold(k.hold)
		}
		if errors.Is(err, errLeaseGone) && !retried {
			continue
		}
		return err
	}
}

func (b *Backend) release(ctx context.Context, l driver.Lease, rl *lease) error {
	k := b.keys(l.Key, l.Owner, l.Kind)
	if anchor, rev := b.holdAnchor(k.hold); rev != 0 {
		return b.releaseHold(ctx, l, k, anchor, clientv3.Compare(clientv3.CreateRevision(anchor), "=", rev), rl)
	}
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "!=", 0),
	).Then(
		clientv3.OpGet(k.own),
		clientv3.OpGet(k.lock, firstOpts(k, l.Kind, 1)...),
		clientv3.OpDelete(k.own),
		clientv3.OpPut(k.receipt, "", clientv3.WithLease(rl.id)),
	).Else(
		clientv3.OpGet(k.receipt, clientv3.WithCountOnly()),
		clientv3.OpGet(k.hold),
	).Commit()
	if err != nil {
		return b.leaseErr(err, rl, "release", l.Key)
	}
	if !resp.Succeeded {
		if hold := resp.Responses[1].GetResponseRange().Kvs; len(hold) > 0 {
			// A hold of a re-entrant lease this backend has no record of
			// (taken by another, or its reply lost): a second round trip.
			return b.releaseUnknown(ctx, l, k, hold[0], rl)
		}
		if resp.Responses[0].GetResponseRange().Count > 0 {
			return nil // released by an earlier call whose reply was lost
		}
		return driver.ErrNotHeld
	}
	own := resp.Responses[0].GetResponseRange().Kvs[0]
	first := resp.Responses[1].GetResponseRange().Kvs
	if l.Kind == driver.Read || l.Kind == driver.Permit || (len(first) > 0 && first[0].CreateRevision == own.CreateRevision) {
		return nil
	}
	// The owner was waiting in line, and has left it: that was no
	// holding, so a repeat should not report one.
	_, _ = b.cli.Delete(ctx, k.receipt)
	return driver.ErrNotHeld
}

// Refresh implements driver.Backend. The lease of the owner's key is
// renewed by the backend's keep-alive; Refresh checks that the key is
// still the owner's holding, moves the key's local deadline to ttl from
// the call's start, and moves the key to the lease for ttl if its TTL in
// seconds differs. The holding's Grant.Lost follows the key: from then on
// it closes when the new lease ends, not the old one (and, if the move's
// outcome is unknown, when either ends).
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if err := checkKey("refresh", l.Key, l.Owner, true); err != nil {
		return 0, err
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("etcdlock: TTL %v is not positive", ttl)
	}
	ctx, cancel := b.call(ctx, ttl)
	defer cancel()
	start := time.Now()
	k := b.keys(l.Key, l.Owner, l.Kind)
	if anchor, _ := b.holdAnchor(k.hold); anchor != "" {
		return b.refreshHold(ctx, l, k, anchor, ttl, start)
	}
	own := k.own
	// Extend the local deadline first: the key must not be deleted while
	// a renewal that may succeed is in flight. No holding kept (released,
	// past its deadline, or its lease ended): the handle was told by
	// Grant.Lost, or its own deadline.
	if b.holding(own) == nil || !b.extendDeadline(own, start.Add(ttl)) {
		return 0, driver.ErrNotHeld
	}
	var ls *lease
	var err error
	for retried := false; ; retried = true {
		if ls, err = b.lease(ctx, seconds(ttl)); err != nil {
			return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
		}
		b.moving(own, ls)
		err = b.refresh(ctx, l, ls)
		if errors.Is(err, errLeaseGone) {
			// Not applied: the key is where it was.
			b.unmoved(own, ls)
			ls.kill()
			if !retried {
				continue // granted another lease, once
			}
			return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
		}
		if errors.Is(err, driver.ErrNotHeld) {
			b.forget(own)
		}
		if err != nil {
			return 0, err
		}
		break
	}
	b.moved(own, ls)
	if time.Until(ls.deadline()) < ttl {
		// The keep-alive is late (or failing): renew now, or fail.
		if err := ls.renew(ctx); err != nil {
			return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
		}
	}
	return ls.validFor(start, ttl, b.drift)
}

// refresh checks that the owner's key holds the lock, and puts it on
// lease ls if it is on another.
func (b *Backend) refresh(ctx context.Context, l driver.Lease, ls *lease) error {
	k := b.keys(l.Key, l.Owner, l.Kind)
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "!=", 0),
	).Then(
		clientv3.OpGet(k.own),
		clientv3.OpGet(k.lock, firstOpts(k, l.Kind, 1)...),
		clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(k.own), "!=", int64(ls.id))},
			[]clientv3.Op{clientv3.OpPut(k.own, "", clientv3.WithIgnoreValue(), clientv3.WithLease(ls.id))}, nil),
	).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return errLeaseGone // not applied: the key is where it was
	}
	if err != nil {
		return fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
	}
	if !resp.Succeeded {
		return driver.ErrNotHeld
	}
	own := resp.Responses[0].GetResponseRange().Kvs[0]
	first := resp.Responses[1].GetResponseRange().Kvs
	if l.Kind == driver.Read || l.Kind == driver.Permit || (len(first) > 0 && first[0].CreateRevision == own.CreateRevision) {
		return nil
	}
	return driver.ErrNotHeld // waiting in line, not holding
}

// Inspect implements driver.Backend. The remaining lease it reports is
// the etcd lease's, in whole seconds as etcd counts them.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(); err != nil {
		return driver.Info{}, err
	}
	if err := checkKey("inspect", key, "", false); err != nil {
		return driver.Info{}, err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	k := b.keys(key, "", driver.Exclusive)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.lock, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(k.last),
		clientv3.OpGet(k.lastSlow),
		clientv3.OpGet(k.holds, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: inspect %q: %w", key, err)
	}
	holds := holders(k, resp.Responses[0].GetResponseRange().Kvs)
	if len(holds) == 0 {
		var token uint64
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			token = uint64(kvs[0].ModRevision)
		}
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
			if t, err := strconv.ParseUint(string(kvs[0].Value), 10, 64); err == nil {
				token = max(token, t)
			}
		}
		return driver.Info{Token: token}, nil
	}
	return b.describe(ctx, k, key, holds, resp.Responses[3].GetResponseRange().Kvs, make(map[int64]time.Duration))
}

// describe returns the Info of a key held by holds, in line order;
// nested are the hold keys of its re-entrant leases (k.holds). ttls
// caches the remaining time of the leases seen.
func (b *Backend) describe(ctx context.Context, k keys, key string, holds, nested []*mvccpb.KeyValue, ttls map[int64]time.Duration) (driver.Info, error) {
	newest := holds[len(holds)-1]
	var h holding
	if err := json.Unmarshal(newest.Value, &h); err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: inspect %q: a holding of another format: %w", key, err)
	}
	if h.Meta == nil {
		h.Meta = make(map[string]string, 1)
	}
	h.Meta["since"] = strconv.FormatInt(h.Since, 10)
	info := driver.Info{Held: true, Kind: h.Kind, Token: uint64(newest.CreateRevision), Holds: len(holds), Meta: h.Meta}
	if k.isAnchor(newest) {
		// A re-entrant lease: its holds are the hold keys put since its
		// anchor (older ones are of a lease that was deleted).
		info.Holds = 0
		for _, kv := range nested {
			if kv.CreateRevision >= newest.CreateRevision {
				info.Holds++
			}
		}
		info.Holds = max(1, info.Holds)
	}
	asked := 0
	for _, kv := range holds {
		left, seen := ttls[kv.Lease]
		if !seen && asked < 4 { // enough to find the longest in practice
			asked++
			ttl, err := b.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				return driver.Info{}, fmt.Errorf("etcdlock: inspect %q: %w", key, err)
			}
			left = time.Duration(ttl.TTL) * time.Second
			ttls[kv.Lease] = left
		}
		info.TTL = max(info.TTL, left)
	}
	info.TTL = max(info.TTL, time.Millisecond) // held: a lease ending within the second
	return info, nil
}

// List implements driver.Backend. It reads every holding and waiter of
// the keys under prefix in one request.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	root, holdRoot := b.prefix+"lock/", b.prefix+"hold/"
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(root+url.PathEscape(prefix), clientv3.WithPrefix()),
		clientv3.OpGet(holdRoot+url.PathEscape(prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdlock: list %q: %w", prefix, err)
	}
	byKey := groupByKey(root, resp.Responses[0].GetResponseRange().Kvs)
	nested := groupByKey(holdRoot, resp.Responses[1].GetResponseRange().Kvs)
	var list []driver.KeyInfo
	ttls := make(map[int64]time.Duration)
	for esc, kvs := range byKey {
		key, err := url.PathUnescape(esc)
		if err != nil || !strings.HasPrefix(key, prefix) {
			continue // not a key this package wrote
		}
		slices.SortFunc(kvs, func(x, y *mvccpb.KeyValue) int { return cmp.Compare(x.CreateRevision, y.CreateRevision) })
		k := b.keys(key, "", driver.Exclusive)
		holds := holders(k, kvs)
		if len(holds) == 0 {
			continue
		}
		info, err := b.describe(ctx, k, key, holds, nested[esc], ttls)
		if err != nil {
			return nil, err
		}
		list = append(list, driver.KeyInfo{Key: key, Info: info})
	}
	slices.SortFunc(list, func(x, y driver.KeyInfo) int { return strings.Compare(x.Key, y.Key) })
	return list, nil
}

// groupByKey groups kvs, keys under root, by the escaped lock key that
// follows root.
func groupByKey(root string, kvs []*mvccpb.KeyValue) map[string][]*mvccpb.KeyValue {
	byKey := make(map[string][]*mvccpb.KeyValue)
	for _, kv := range kvs {
		rest := string(kv.Key[len(root):])
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			continue
		}
		byKey[rest[:i]] = append(byKey[rest[:i]], kv)
	}
	return byKey
}

// Break implements driver.Backend: it deletes the keys of the holdings,
// and keeps the waiters' places in line. Tokens, being revisions, only
// grow.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(); err != nil {
		return driver.Info{}, err
	}
	if err := checkKey("break", key, "", false); err != nil {
		return driver.Info{}, err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	k := b.keys(key, "", driver.Exclusive)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.lock, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(k.holds, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: break %q: %w", key, err)
	}
	holds := holders(k, resp.Responses[0].GetResponseRange().Kvs)
	if len(holds) == 0 {
		return b.Inspect(ctx, key)
	}
	info, err := b.describe(ctx, k, key, holds, resp.Responses[1].GetResponseRange().Kvs, make(map[int64]time.Duration))
	if err != nil {
		return driver.Info{}, err
	}
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for _, kv := range holds {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision))
		del := clientv3.OpDelete(string(kv.Key))
		if k.isAnchor(kv) { // a re-entrant lease: its holds go with it
			del = clientv3.OpTxn(nil, []clientv3.Op{del, clientv3.OpDelete(k.holds, clientv3.WithPrefix())}, nil)
		}
		dels = append(dels, del)
	}
	// Only the holdings read: if one left meanwhile, delete the others
	// one by one.
	tr, err := b.cli.Txn(ctx).If(cmps...).Then(dels...).Commit()
	if err == nil && !tr.Succeeded {
		for i := range holds {
			if _, err = b.cli.Txn(ctx).If(cmps[i]).Then(dels[i]).Commit(); err != nil {
				break
			}
		}
	}
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: break %q: %w", key, err)
	}
	return info, nil
}

// holders returns, of the keys of a lock in line order, those that hold
// it: the first writer, or the readers before the first writer, or the
// permits (which never wait in line). Keys this package does not write
// under the lock (an operator's, another program's), which name no kind
// of holding and an owner, are passed over.
func holders(k keys, kvs []*mvccpb.KeyValue) []*mvccpb.KeyValue {
	kind := func(kv *mvccpb.KeyValue) string {
		if rest := kv.Key[len(k.lock):]; len(rest) > 2 {
			switch s := string(rest[:2]); s {
			case "w/", "r/", "p/":
				return s
			}
		}
		return ""
	}
	line := make([]*mvccpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if kind(kv) != "" {
			line = append(line, kv)
		}
	}
	if len(line) == 0 {
		return nil
	}
	switch kind(line[0]) {
	case "w/":
		return line[:1]
	case "r/":
		for i, kv := range line {
			if kind(kv) != "r/" {
				return line[:i]
			}
		}
	}
	return line
}

// Close implements driver.Backend: it stops the keep-alives of the
// backend's leases, its watches and its key deadlines, and waits for
// them. Held locks are not released: their leases run out. A client the
// backend opened from a URL is closed. Calls after Close return an error
// wrapping distlock.ErrInvalidBackend (and calls under way may); closing
// again does nothing.
func (b *Backend) Close() error {
	if b == nil || b.cli == nil {
		return errNilClient
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for _, d := range b.deadlines {
		d.timer.Stop()
	}
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	if b.ownClient {
		return b.cli.Close()
	}
	return nil
}
