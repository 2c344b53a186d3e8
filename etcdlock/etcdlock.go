package etcdlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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
// called concurrently. The methods of a nil *Backend, of one on a nil
// client or given an invalid option, and of a closed one, return an error
// wrapping driver.ErrInvalidBackend.
type Backend struct {
	cli         *clientv3.Client
	prefix      string
	drift       func(time.Duration) time.Duration
	ownClient   bool // opened from a URL: closed with the backend
	callTimeout time.Duration
	opts        driver.OptionCheck // the first invalid option, if any

	ctx    context.Context // ends with Close: keep-alives, watches
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool             // by Close: no goroutine starts after it
	leases    map[int64]*lease // by TTL in seconds
	receipts  *lease
	granted   time.Time            // of receipts
	deadlines map[string]*deadline // by etcd key (see deadline.go)
	reholds   map[string]string    // re-entrant hold key -> its anchor (see reentry.go)
	names     map[string]string    // ownerIndex -> the name of the owner's key (see hold.go)
	id        string               // in the names of the backend's keys
	spares    map[int64]*lease     // by TTL in seconds: for a new re-entrant lease
}

var _ driver.Backend = (*Backend)(nil)

// An Option configures a [Backend].
type Option func(*Backend)

// WithPrefix sets the string put before every key the backend writes
// (default [DefaultPrefix]). Clients that share locks use the same prefix.
func WithPrefix(p string) Option { return func(b *Backend) { b.prefix = p } }

// WithDrift sets the clock drift allowance subtracted from a lease's TTL to
// get its local validity (default driver.DefaultDrift: 1% + 2ms). A nil
// f makes every method fail with an error wrapping
// driver.ErrInvalidBackend.
func WithDrift(f func(ttl time.Duration) time.Duration) Option {
	return func(b *Backend) {
		if f == nil {
			b.opts.Invalid("etcdlock", "WithDrift(nil)", "want a drift function")
			return
		}
		b.drift = f
	}
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
// release held locks (their leases run out). An invalid option makes
// every method fail with an error wrapping driver.ErrInvalidBackend.
func New(cli *clientv3.Client, opts ...Option) *Backend {
	b := &Backend{cli: cli, prefix: DefaultPrefix, drift: driver.DefaultDrift, leases: make(map[int64]*lease), id: newID()}
	for _, opt := range opts {
		if opt == nil {
			b.opts.Invalid("etcdlock", "New", "a nil Option")
			continue
		}
		opt(b)
	}
	if b.callTimeout <= 0 {
		b.callTimeout = DefaultCallTimeout
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// newID returns the backend's part of the names of its keys: random, so
// that no other backend names a key the same, and followed by a slot
// number.
func newID() string {
	var id [9]byte
	_, _ = rand.Read(id[:]) // never fails
	return base64.RawURLEncoding.EncodeToString(id[:]) + "."
}

// check fails on a backend that cannot work (see [driver.OptionCheck]),
// or a closed one.
func (b *Backend) check() error {
	if b == nil || b.cli == nil {
		return errNilClient
	}
	if err := b.opts.Err(); err != nil {
		return err
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

// checkKey refuses a key that no etcd key can stand for, for the methods
// given a key alone (Watch, Inspect, Break): the contract's key check.
func checkKey(op, key string) error {
	if err := driver.ValidateKey(key); err != nil {
		return fmt.Errorf("etcdlock: %s: %w", op, err)
	}
	return nil
}

// Capabilities implements driver.Backend: releases are notified (a fair
// waiter only by the release of the key queued just before its own),
// fair locks, read-write locks, semaphores and re-entrant locks are
// offered. A fair re-entrant lock takes its first hold in turn; further
// holds of the identity, while it holds, are granted at once.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}
}

// keys are the etcd keys of one lock key.
type keys struct {
	lock    string // prefix of every holding and waiter
	sub     string // prefix of the holdings of the request's kind (and limit)
	own     string // the owner's, once named (see Backend.arm)
	val     string // the value of the owner's key, once named
	receipt string // the owner's receipt of its release
	holds   string // prefix of the holds of a re-entrant lease (see reentry.go)
	hold    string // the owner's hold of a re-entrant lease
}

// keys names the etcd keys of the owner's holding of key, of kind (and,
// for a permit, of a semaphore of limit permits).
func (b *Backend) keys(key, owner string, kind driver.Kind, limit int) keys {
	k, o := url.PathEscape(key), url.PathEscape(owner)
	// Each name is a prefix of the next: one string holds them.
	own := b.prefix + "lock/" + k + "/" + subprefix(kind, limit) + o
	hold := b.prefix + "hold/" + k + "/" + o
	return keys{
		lock:    own[:len(b.prefix)+len("lock/")+len(k)+1],
		sub:     own[:len(own)-len(o)],
		own:     own,
		receipt: b.prefix + "released/" + k + "/" + o,
		holds:   hold[:len(hold)-len(o)],
		hold:    hold,
	}
}

// mine compares true if the owner's key has the value the owner's
// attempts put: it is the owner's, not another key of the same name. It
// compares false if the key does not exist, or its value is unknown.
func (k keys) mine() clientv3.Cmp { return clientv3.Compare(clientv3.Value(k.own), "=", k.val) }

// isMine reports whether kv, read as the owner's key, is the owner's.
func (k keys) isMine(kv *mvccpb.KeyValue) bool { return k.val != "" && string(kv.Value) == k.val }

// receipts is the prefix of the receipts of releases of k's lock.
func (k keys) receipts() string { return k.receipt[:strings.LastIndexByte(k.receipt, '/')+1] }

// subprefix separates the kinds, so that a transaction can check a
// key's family (see kind.go): readers look for writers only, and Release
// knows which kinds wait in line. A semaphore's size is part of its
// permits' names.
func subprefix(kind driver.Kind, limit int) string {
	switch kind {
	case driver.Write:
		return "w/"
	case driver.Read:
		return "r/"
	case driver.Permit:
		return "p/" + strconv.Itoa(limit) + "/"
	}
	return "m/"
}

// holdingValue is the value of the owner's key for req: a holding in
// JSON, which names the owner, since the key's name does not.
func holdingValue(req driver.Request) (string, error) {
	since := time.Now().UnixMilli()
	if len(req.Meta) > 0 {
		val, err := json.Marshal(holding{Owner: url.PathEscape(req.Owner), Kind: req.Kind, Since: since, Meta: req.Meta})
		if err != nil {
			return "", fmt.Errorf("etcdlock: metadata: %w", err)
		}
		return string(val), nil
	}
	owner := url.PathEscape(req.Owner) // ASCII, and nothing JSON escapes
	buf := make([]byte, 0, 64+len(owner))
	buf = append(buf, `{"owner":"`...)
	buf = append(buf, owner...)
	buf = append(buf, `","kind":`...)
	buf = strconv.AppendInt(buf, int64(req.Kind), 10)
	buf = append(buf, `,"since":`...)
	buf = strconv.AppendInt(buf, since, 10)
	return string(append(buf, '}')), nil
}

// holding is the value of an owner's key.
type holding struct {
	Owner string            `json:"owner,omitempty"` // path-escaped: any owner, exactly
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
	var g driver.Grant
	err := persist(ctx, func(ctx context.Context) error {
		var err error
		if req.Reentry != "" {
			g, err = b.acquireReentrant(ctx, req, start)
		} else {
			g, err = b.acquireOnce(ctx, req, start)
		}
		return err
	})
	return g, err
}

// acquireOnce is one try of Acquire for a request without a re-entrant
// identity.
func (b *Backend) acquireOnce(ctx context.Context, req driver.Request, start time.Time) (driver.Grant, error) {
	k, err := b.arm(ctx, req, b.keys(req.Key, req.Owner, req.Kind, req.Limit), start.Add(max(req.TTL, req.Queue)))
	if err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	if g, ok := b.takeTurn(req, k.own, start); ok {
		return g, nil
	}
	if req.Queue > 0 {
		if rev := b.behind(k.own); rev != 0 {
			// Its watch just read the line: not its turn yet.
			b.setDeadline(k.own, rev, start.Add(req.Queue), nil)
			return driver.Grant{}, nil
		}
	}
	for retried := false; ; retried = true {
		l, err := b.lease(ctx, seconds(req.TTL))
		if err != nil {
			return driver.Grant{}, err
		}
		var g driver.Grant
		if rev, on := b.inLine(k.own); on != nil {
			// A waiter in line: its place is known, the check is a read.
			g, err = b.confirm(ctx, req, k, &mvccpb.KeyValue{CreateRevision: rev, Lease: int64(on.id)}, l, start)
		} else {
			g, err = b.acquire(ctx, req, k, l, start)
		}
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

// takeTurn grants, without a request, a waiter whose watch saw its turn
// come (see Watch): its place key holds the lock since a revision the
// watch saw, and keeps holding it as long as it exists, which its lease
// and its deadline tell. The place must be on the lease this request
// would use, alive; otherwise the attempt asks etcd.
func (b *Backend) takeTurn(req driver.Request, own string, start time.Time) (driver.Grant, bool) {
	if req.Queue <= 0 || req.Kind != driver.Exclusive {
		return driver.Grant{}, false
	}
	rev, l := b.turn(own)
	if l == nil || !l.alive() {
		return driver.Grant{}, false
	}
	b.mu.Lock()
	current := b.leases[seconds(req.TTL)] == l
	b.mu.Unlock()
	if !current {
		return driver.Grant{}, false
	}
	valid, err := l.validFor(start, req.TTL, b.drift)
	if err != nil {
		return driver.Grant{}, false
	}
	lost := b.setDeadline(own, rev, start.Add(req.TTL), l)
	return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost, ValidFor: valid}, true
}

// checkRequest refuses a request before anything is sent: from a backend
// that cannot work, or one that breaks the contract or asks for what the
// backend does not offer.
func (b *Backend) checkRequest(req driver.Request) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := req.Validate(b.Capabilities()); err != nil {
		return fmt.Errorf("etcdlock: acquire: %w", err)
	}
	return nil
}

// acquire makes the attempt on lease l. Every transaction that may put
// the owner's key also checks the key's family (see kind.go).
func (b *Backend) acquire(ctx context.Context, req driver.Request, k keys, l *lease, start time.Time) (driver.Grant, error) {
	put := clientv3.OpPut(k.own, k.val, clientv3.WithLease(l.id))
	// Free for this request: nothing in the way at all; for a reader, no
	// writer (held or waiting); for a permit, no other permit.
	free := clientv3.Compare(clientv3.CreateRevision(k.lock), "=", 0).WithPrefix()
	switch req.Kind {
	case driver.Read:
		free = clientv3.Compare(clientv3.CreateRevision(k.lock+"w/"), "=", 0).WithPrefix()
	case driver.Permit:
		free = clientv3.Compare(clientv3.CreateRevision(k.sub), "=", 0).WithPrefix()
	}
	queue := req.Queue > 0 && (req.Kind == driver.Exclusive || req.Kind == driver.Write)
	if req.Kind == driver.Exclusive && !queue {
		if g, done, err := b.acquireMutex(ctx, req, k, put, l, start); done {
			return g, err
		}
	}
	// The replies of the transaction below, by branch: Then's first is
	// the check that grants (with, for a permit refused, the count of
	// permits first among its replies); Else reads the owner's key, then
	// the key's families (see keys.familyReads).
	const (
		acquireCheck  = 0 // Then
		checkedCount  = 0 // the check's Else, for a permit
		acquireOwn    = 0 // Else
		acquireFamily = 1 // Else, and on
	)
	var then []clientv3.Op
	switch {
	case queue:
		// Granted if free, else in line: the key is put either way, after
		// the check (one transaction may put a key only once).
		then = []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{free}, nil, nil), put}
	case req.Kind == driver.Permit:
		then = []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{put},
			[]clientv3.Op{clientv3.OpGet(k.sub, clientv3.WithPrefix(), clientv3.WithCountOnly())})}
	default:
		then = []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{put}, nil)}
	}
	resp, err := b.cli.Txn(ctx).If(
		append(k.compatible(req.Kind, req.Limit), clientv3.Compare(clientv3.CreateRevision(k.own), "=", 0))...,
	).Then(then...).Else(
		append([]clientv3.Op{clientv3.OpGet(k.own)}, k.familyReads()...)...,
	).Commit()
	if err != nil {
		return driver.Grant{}, b.leaseErr(err, l, "acquire", req.Key)
	}
	if resp.Succeeded {
		inner := resp.Responses[acquireCheck].GetResponseTxn()
		rev := resp.Header.Revision
		switch {
		case inner.Succeeded:
			lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
			return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, nil
		case queue:
			b.setDeadline(k.own, rev, start.Add(req.Queue), nil) // in line
			b.placed(k.own, rev, l)
			return driver.Grant{}, nil
		case req.Kind == driver.Permit && inner.Responses[checkedCount].GetResponseRange().Count < int64(req.Limit):
			return b.acquirePermit(ctx, req, k, put, l, start, rev)
		}
		b.forget(k.own) // the owner has no key: the transaction said so
		return driver.Grant{}, nil
	}
	// The owner has a key (a repeat of an attempt that took it, or a
	// waiter's next attempt), or the key is held as another kind.
	kvs := resp.Responses[acquireOwn].GetResponseRange().Kvs
	if len(kvs) == 0 {
		if err := k.mismatch(req.Key, req.Kind, req.Limit, resp.Responses[acquireFamily:]); err != nil {
			b.forget(k.own)
			return driver.Grant{}, err
		}
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: the owner's key vanished during the attempt", req.Key)
	}
	return b.confirmMine(ctx, req, k, kvs[0], l, start)
}

// acquireMutex is the attempt of a plain mutex: it puts the owner's key
// if the line is empty, which leaves no room for a key of another family
// either. Refused, it reads the owner's key (a repeat) and the first in
// line: a mutex's key refuses the attempt; a key of another family, or
// one this package did not write, leaves the answer to the general
// attempt (done false), which reports a family that does not fit.
func (b *Backend) acquireMutex(ctx context.Context, req driver.Request, k keys, put clientv3.Op, l *lease, start time.Time) (g driver.Grant, done bool, err error) {
	const ( // the replies of a refusal (Else)
		refusedOwn   = 0 // the owner's key
		refusedFirst = 1 // the first in line
	)
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.lock), "=", 0).WithPrefix(),
	).Then(put).Else(
		clientv3.OpGet(k.own),
		clientv3.OpGet(k.lock, firstOpts(k, req.Kind, 1)...),
	).Commit()
	if err != nil {
		return driver.Grant{}, true, b.leaseErr(err, l, "acquire", req.Key)
	}
	if resp.Succeeded {
		rev := resp.Header.Revision
		lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
		return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, true, nil
	}
	if kvs := resp.Responses[refusedOwn].GetResponseRange().Kvs; len(kvs) > 0 {
		g, err := b.confirmMine(ctx, req, k, kvs[0], l, start)
		return g, true, err
	}
	first := resp.Responses[refusedFirst].GetResponseRange().Kvs
	if len(first) == 0 || !strings.HasPrefix(string(first[0].Key), k.sub) {
		return driver.Grant{}, false, nil
	}
	b.forget(k.own) // the owner has no key: the transaction said so
	return driver.Grant{}, true, nil
}

// acquirePermit tries for a permit of a semaphore that had fewer than
// req.Limit holders at revision rev: it puts the owner's key on lease l
// if no permit was put since, so that the key is among the first
// req.Limit from the transaction that puts it (permits do not wait in
// line). It reads the count again and repeats while permits come and go
// and some are free.
func (b *Backend) acquirePermit(ctx context.Context, req driver.Request, k keys, put clientv3.Op, l *lease, start time.Time, rev int64) (driver.Grant, error) {
	const ( // the replies of a refusal (Else)
		refusedOwn    = 0 // the owner's key
		refusedCount  = 1 // the count of permits
		refusedFamily = 2 // the key's families, and on
	)
	for {
		cmps := append(k.compatible(req.Kind, req.Limit),
			clientv3.Compare(clientv3.CreateRevision(k.own), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(k.sub), "<", rev+1).WithPrefix())
		resp, err := b.cli.Txn(ctx).If(cmps...).Then(put).Else(
			append([]clientv3.Op{clientv3.OpGet(k.own), clientv3.OpGet(k.sub, clientv3.WithPrefix(), clientv3.WithCountOnly())},
				k.familyReads()...)...,
		).Commit()
		if err != nil {
			return driver.Grant{}, b.leaseErr(err, l, "acquire a permit of", req.Key)
		}
		rev = resp.Header.Revision
		if resp.Succeeded {
			lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
			return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, nil
		}
		if kvs := resp.Responses[refusedOwn].GetResponseRange().Kvs; len(kvs) > 0 {
			return b.confirmMine(ctx, req, k, kvs[0], l, start)
		}
		if err := k.mismatch(req.Key, req.Kind, req.Limit, resp.Responses[refusedFamily:]); err != nil {
			b.forget(k.own)
			return driver.Grant{}, err
		}
		if resp.Responses[refusedCount].GetResponseRange().Count >= int64(req.Limit) {
			b.forget(k.own)
			return driver.Grant{}, nil
		}
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire a permit of %q: %w", req.Key, err)
		}
	}
}

// giveBack deletes the owner's permit key, created at rev, which is not
// among the first req.Limit (a key left by an older version of this
// package, which put permits before checking them).
func (b *Backend) giveBack(ctx context.Context, req driver.Request, k keys, rev int64) (driver.Grant, error) {
	_, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev)).Then(clientv3.OpDelete(k.own)).Commit()
	if err != nil {
		// The key stays until its deadline, armed by Acquire.
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire a permit of %q: give back the key past the first %d: %w", req.Key, req.Limit, err)
	}
	b.forget(k.own)
	return driver.Grant{}, nil
}

// confirmMine is confirm for kv, a key read under the owner's name: if
// another value than the owner's shows it is not the owner's key (one put
// under the name earlier, by an attempt whose reply was lost and whose
// owner is gone), it deletes that key, which nobody holds, and the
// attempt starts over (the error wraps errKeyGone).
func (b *Backend) confirmMine(ctx context.Context, req driver.Request, k keys, kv *mvccpb.KeyValue, l *lease, start time.Time) (driver.Grant, error) {
	if k.isMine(kv) {
		return b.confirm(ctx, req, k, kv, l, start)
	}
	_, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.own), "=", kv.CreateRevision)).Then(clientv3.OpDelete(k.own)).Commit()
	if err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: delete a stale key of the owner's name: %w", req.Key, err)
	}
	return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: a stale key of the owner's name: %w", req.Key, errKeyGone)
}

// confirm finishes an attempt of an owner whose key, kv, exists: it is
// granted if the key is first in line (for a permit, among the first
// req.Limit, which it is from the start).
//
// The check is a read, and issue grants in a transaction of its own,
// applied only if the key still has kv's create revision: a key that
// holds keeps holding as long as it exists, since the keys put later are
// behind it, but it may end between the two (its lease expires, or a
// Break deletes it). The attempt then starts over.
func (b *Backend) confirm(ctx context.Context, req driver.Request, k keys, kv *mvccpb.KeyValue, l *lease, start time.Time) (driver.Grant, error) {
	rev := kv.CreateRevision
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev),
	).Then(
		firstHolders(k, req.Kind, req.Limit),
	).Commit()
	if err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	if !resp.Succeeded {
		b.vanished(k.own, rev)
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, errKeyGone)
	}
	const confirmedFirst = 0 // Then: the first holders in line
	if !granted(req.Kind, rev, resp.Responses[confirmedFirst].GetResponseRange().Kvs) {
		switch {
		case req.Kind == driver.Permit:
			return b.giveBack(ctx, req, k, rev)
		case req.Queue > 0:
			b.setDeadline(k.own, rev, start.Add(req.Queue), nil) // the place, renewed
			if kv.Lease == int64(l.id) {
				b.placed(k.own, rev, l)
			}
		}
		return driver.Grant{}, nil
	}
	if f := beforeIssue.Load(); f != nil {
		(*f)(k.own)
	}
	// Granted now (a waiter's turn) or earlier (a repeat).
	return b.issue(ctx, req, k, rev, kv.Lease, l, start)
}

// issue grants the owner's key, created at rev and on lease on, which
// holds the lock: in one transaction, applied only if the key still has
// that create revision, it puts the key on lease l if it is on another.
// The grant's deadline is set, and its Lost tied to l, only once the
// transaction is applied. If it is not, the key is gone: the error wraps
// errKeyGone.
func (b *Backend) issue(ctx context.Context, req driver.Request, k keys, rev, on int64, l *lease, start time.Time) (driver.Grant, error) {
	// A transaction without a range or a write is served as a
	// serializable read, by any member: the count makes the check
	// linearizable.
	op := clientv3.OpGet(k.own, clientv3.WithCountOnly())
	if on != int64(l.id) {
		op = clientv3.OpPut(k.own, "", clientv3.WithIgnoreValue(), clientv3.WithLease(l.id))
	}
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev),
	).Then(op).Commit()
	if err != nil {
		return driver.Grant{}, b.leaseErr(err, l, "acquire", req.Key)
	}
	if !resp.Succeeded {
		b.vanished(k.own, rev)
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, errKeyGone)
	}
	lost := b.setDeadline(k.own, rev, start.Add(req.TTL), l)
	return driver.Grant{Acquired: true, Token: uint64(rev), Lost: lost}, nil
}

// firstHolders reads, in line order, the keys that decide whether a
// request of kind is granted: the first key of all (a mutex or a writer),
// the first writer (a reader), the first limit permits.
func firstHolders(k keys, kind driver.Kind, limit int) clientv3.Op {
	key := k.lock
	switch kind {
	case driver.Read:
		key = k.lock + "w/"
	case driver.Permit:
		key = k.sub
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
// for a few seconds (5 to 10), so that a repeated Release reports success;
// it notes the holding's token, for Inspect to report while the key is
// free.
func (b *Backend) Release(ctx context.Context, l driver.Lease) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("etcdlock: release: %w", err)
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	// A hold of a re-entrant lease is found by its own name.
	anchor, _ := b.holdAnchor(b.keys(l.Key, l.Owner, l.Kind, 0).hold)
	k, err := b.leaseKeys(ctx, l, anchor == "")
	if err != nil {
		return err
	}
	for retried := false; ; retried = true {
		rl, err := b.receiptLease(ctx)
		if err != nil {
			return err
		}
		err = b.release(ctx, l, k, rl)
		if err == nil || errors.Is(err, driver.ErrNotHeld) {
			b.forget(k.own)
			b.dropHold(k.hold)
		}
		if errors.Is(err, errLeaseGone) && !retried {
			continue
		}
		return err
	}
}

// leaseKeys names the keys of l's holding: the key this backend's
// attempt named, or, for an owner it has no record of and if search is
// set, the one found in the key's line with a value that names the owner
// (none found: no holding, and a name that compares as none).
func (b *Backend) leaseKeys(ctx context.Context, l driver.Lease, search bool) (keys, error) {
	k := b.keys(l.Key, l.Owner, l.Kind, 0)
	if named, ok := b.named(k, l.Kind, l.Owner); ok {
		return b.withLimit(named, l), nil
	}
	if !search {
		return k, nil
	}
	from := k.sub
	if l.Kind == driver.Permit {
		from = k.lock + "p/" // of any size
	}
	resp, err := b.cli.Get(ctx, from, clientv3.WithPrefix())
	if err != nil {
		return keys{}, fmt.Errorf("etcdlock: find the key of %q: %w", l.Key, err)
	}
	owner := url.PathEscape(l.Owner)
	for _, kv := range resp.Kvs {
		var h holding
		if json.Unmarshal(kv.Value, &h) == nil && h.Owner == owner {
			k.own, k.val = string(kv.Key), string(kv.Value)
			return b.withLimit(k, l), nil
		}
	}
	return k, nil
}

// withLimit returns k, whose own key is named, with the prefix of its
// permits' semaphore size if it is a permit's.
func (b *Backend) withLimit(k keys, l driver.Lease) keys {
	if l.Kind != driver.Permit {
		return k
	}
	own, val := k.own, k.val
	k = b.keys(l.Key, l.Owner, l.Kind, k.permitLimit([]byte(own)))
	k.own, k.val = own, val
	return k
}

// receiptOp writes the owner's receipt on lease rl: with the token of the
// holding if the owner's key, own, still has create revision rev (0:
// unknown).
func receiptOp(k keys, own string, rev int64, rl *lease) clientv3.Op {
	plain := clientv3.OpPut(k.receipt, "", clientv3.WithLease(rl.id))
	if rev == 0 {
		return plain
	}
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(own), "=", rev)},
		[]clientv3.Op{clientv3.OpPut(k.receipt, strconv.FormatInt(rev, 10), clientv3.WithLease(rl.id))},
		[]clientv3.Op{plain})
}

func (b *Backend) release(ctx context.Context, l driver.Lease, k keys, rl *lease) error {
	if anchor, rev := b.holdAnchor(k.hold); rev != 0 {
		return b.releaseHold(ctx, l, k, anchor, clientv3.Compare(clientv3.CreateRevision(anchor), "=", rev), rev, rl)
	}
	if rev := b.held(k.own); rev != 0 {
		// A holding this backend granted: its key holds as long as it
		// has that create revision.
		resp, err := b.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(k.own), "=", rev),
		).Then(
			clientv3.OpPut(k.receipt, strconv.FormatInt(rev, 10), clientv3.WithLease(rl.id)),
			clientv3.OpDelete(k.own),
		).Commit()
		if err != nil {
			return b.leaseErr(err, rl, "release", l.Key)
		}
		if resp.Succeeded {
			return nil
		}
		// Gone, or another key: the general release tells which.
	}
	const (
		releasedOwn     = 0 // Then: the owner's key, before its deletion
		releasedFirst   = 1 // Then: the first in line
		unheldReceipt   = 0 // Else: the count of the owner's receipts
		unheldReentrant = 1 // Else: the owner's hold of a re-entrant lease
	)
	resp, err := b.cli.Txn(ctx).If(
		k.mine(),
	).Then(
		clientv3.OpGet(k.own),
		clientv3.OpGet(k.lock, firstOpts(k, l.Kind, 1)...),
		receiptOp(k, k.own, b.revision(k.own), rl),
		clientv3.OpDelete(k.own),
	).Else(
		clientv3.OpGet(k.receipt, clientv3.WithCountOnly()),
		clientv3.OpGet(k.hold),
	).Commit()
	if err != nil {
		return b.leaseErr(err, rl, "release", l.Key)
	}
	if !resp.Succeeded {
		if hold := resp.Responses[unheldReentrant].GetResponseRange().Kvs; len(hold) > 0 {
			// A hold of a re-entrant lease this backend has no record of
			// (taken by another, or its reply lost): a second round trip.
			return b.releaseUnknown(ctx, l, k, hold[0], rl)
		}
		if resp.Responses[unheldReceipt].GetResponseRange().Count > 0 {
			return nil // released by an earlier call whose reply was lost
		}
		return driver.ErrNotHeld
	}
	own := resp.Responses[releasedOwn].GetResponseRange().Kvs[0]
	first := resp.Responses[releasedFirst].GetResponseRange().Kvs
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
// the call's start (earlier, for a shorter ttl, once the check succeeded:
// a holder that stops renewing then loses its key at that ttl, not the
// one asked for before), and moves the key to the lease for ttl if its
// TTL in seconds differs. The holding's Grant.Lost follows the key: from then on
// it closes when the new lease ends, not the old one (and, if the move's
// outcome is unknown, when either ends).
func (b *Backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if err := l.ValidateRefresh(ttl); err != nil {
		return 0, fmt.Errorf("etcdlock: refresh: %w", err)
	}
	ctx, cancel := b.call(ctx, ttl)
	defer cancel()
	start := time.Now()
	// Only a holding this backend keeps is renewed (see below): no
	// search for another's.
	k, err := b.leaseKeys(ctx, l, false)
	if err != nil {
		return 0, err
	}
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
	for retried := false; ; retried = true {
		if ls, err = b.lease(ctx, seconds(ttl)); err != nil {
			return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
		}
		b.moving(own, ls)
		_, err = hedge(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.refresh(ctx, l, k, ls) })
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
	v, err := ls.validFor(start, ttl, b.drift)
	if err == nil {
		b.setAt(own, start.Add(ttl))
	}
	return v, err
}

// refresh checks that the owner's key holds the lock, and puts it on
// lease ls if it is on another.
func (b *Backend) refresh(ctx context.Context, l driver.Lease, k keys, ls *lease) error {
	const ( // the replies of a refresh of the owner's key (Then)
		refreshedOwn   = 0 // the owner's key
		refreshedFirst = 1 // the first in line
	)
	resp, err := b.cli.Txn(ctx).If(
		k.mine(),
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
	own := resp.Responses[refreshedOwn].GetResponseRange().Kvs[0]
	first := resp.Responses[refreshedFirst].GetResponseRange().Kvs
	if l.Kind == driver.Read || l.Kind == driver.Permit || (len(first) > 0 && first[0].CreateRevision == own.CreateRevision) {
		return nil
	}
	return driver.ErrNotHeld // waiting in line, not holding
}

// Close implements driver.Backend: it stops the keep-alives of the
// backend's leases, its watches and its key deadlines, and waits for
// them. Held locks are not released: their leases run out. A client the
// backend opened from a URL is closed. Calls after Close return an error
// wrapping driver.ErrInvalidBackend (and calls under way may); closing
// again does nothing.
func (b *Backend) Close() error {
	if b == nil || b.cli == nil {
		return errNilClient
	}
	if !b.shut() {
		return nil
	}
	b.cancel()
	b.wg.Wait()
	if b.ownClient {
		return b.cli.Close()
	}
	return nil
}

// shut marks the backend closed and stops its key deadlines; it reports
// false if it was closed already.
func (b *Backend) shut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.closed = true
	for _, d := range b.deadlines {
		d.timer.Stop()
	}
	return true
}
