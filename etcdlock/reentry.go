package etcdlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// A re-entrant lease (driver.Request.Reentry) is two kinds of etcd key.
// Its anchor stands in the lock's line, named after a digest of the
// identity (lock/<key>/w/%R<digest>: no escaped owner is named so); its
// create revision is the token of every hold. Each hold is a key of its
// own, hold/<key>/<owner>, outside the line, so that the count of holds
// lives on the server and a hold is found by its owner alone. The first
// hold puts the anchor and its hold key in one transaction, only if the
// line is empty; another hold puts its key, if the anchor still has its
// create revision; a release deletes the owner's hold key and, if no
// other hold key is left, the anchor, in one transaction.
//
// The anchor and the hold keys are on a lease of their own, the
// identity's lease, not on a backend's shared lease: holds may come from
// several backends (a lock handed to another process), and the lock must
// neither end with the backend that took it first nor be kept alive by
// another backend's unrelated locks. Every backend with a hold keeps the
// identity's lease alive and watches it (Grant.Lost), until its last hold
// there is released; the lease ends the keys when no holder renews it.
// The first hold is put on a lease granted just before (a spare, kept for
// the next attempt if this one is refused).
//
// Locally a backend keeps one deadline per identity, keyed by the anchor,
// listing the hold keys it put: each Acquire or Refresh of one of its
// holds extends it, so renewing one renews the others. When it passes,
// the backend deletes its hold keys, and the anchor if no other hold key
// is left.

// reentryRounds bounds the rounds of one attempt that the identity's
// other holds keep changing the lease under.
const reentryRounds = 5

// anchorMark follows the kind's prefix in an anchor's name. PathEscape
// writes '%' only before two hex digits, so no owner's key starts so.
const anchorMark = "%R"

// holdValue is the value of a hold key.
type holdValue struct {
	Reentry string `json:"re"` // the digest of the identity: its anchor's name
}

// reentryDigest names an identity in etcd. Request.Reentry is a secret
// (whoever has it enters the lock): keys show a one-way function of it.
func reentryDigest(reentry string) string {
	sum := sha256.Sum256([]byte("etcdlock reentry\x00" + reentry))
	return hex.EncodeToString(sum[:16])
}

// anchor is the key of the re-entrant lease of the identity of digest rd.
func (k keys) anchor(rd string) string { return k.lock + "m/" + anchorMark + rd }

// isAnchor reports whether kv, a key of k's line, is a re-entrant lease's.
func (k keys) isAnchor(kv *mvccpb.KeyValue) bool {
	return strings.HasPrefix(string(kv.Key), k.lock+"m/"+anchorMark)
}

// acquireReentrant is Acquire for a request with a re-entrant identity.
// The hold is armed first: if the reply is lost and the owner never asks
// again, the identity's deadline deletes it.
func (b *Backend) acquireReentrant(ctx context.Context, req driver.Request, start time.Time) (driver.Grant, error) {
	k := b.keys(req.Key, req.Owner, req.Kind, 0)
	rd := reentryDigest(req.Reentry)
	anchor := k.anchor(rd)
	val, err := json.Marshal(holdValue{Reentry: rd})
	if err != nil {
		return driver.Grant{}, err
	}
	if err := b.armHold(ctx, anchor, k.hold, start.Add(max(req.TTL, req.Queue))); err != nil {
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	for range reentryRounds {
		var g driver.Grant
		var done bool
		if rev, l := b.knownIdentity(anchor); l != nil {
			// One more hold of an identity this backend holds: one round trip.
			g, done, err = b.join(ctx, req, k, anchor, string(val), rev, l, start)
		} else {
			g, done, err = b.attemptHold(ctx, req, k, anchor, string(val), start)
		}
		var kindErr *driver.KindError
		if errors.As(err, &kindErr) {
			b.dropHold(k.hold) // refused: the transaction put nothing
		}
		if err != nil {
			return driver.Grant{}, err // unknown outcome: the hold stays armed
		}
		if done {
			if !g.Acquired && !queues(req) {
				b.dropHold(k.hold) // refused: the transaction put nothing
			}
			return g, nil
		}
	}
	return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: the re-entrant lease kept changing; retry", req.Key)
}

// attemptHold makes the attempt of an owner that does not know the
// identity's lease: in one transaction, it finds the owner's hold (a
// repeat), or takes the lock if the line is empty, or reads the line.
// done is false when the caller should try again.
func (b *Backend) attemptHold(ctx context.Context, req driver.Request, k keys, anchor, val string, start time.Time) (g driver.Grant, done bool, err error) {
	spare, err := b.takeSpare(ctx, seconds(req.TTL))
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	desc, err := json.Marshal(holding{Kind: driver.Exclusive, Since: time.Now().UnixMilli(), Meta: req.Meta})
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("etcdlock: metadata: %w", err)
	}
	free := clientv3.Compare(clientv3.CreateRevision(k.lock), "=", 0).WithPrefix()
	reads := append([]clientv3.Op{clientv3.OpGet(anchor)}, k.familyReads()...)
	if queues(req) {
		// Not free: the anchor, put alone, is the identity's place in
		// line, unless it has one (see queues).
		reads = append(reads, clientv3.OpTxn(
			append(k.compatible(driver.Exclusive, 0), clientv3.Compare(clientv3.CreateRevision(anchor), "=", 0)),
			[]clientv3.Op{clientv3.OpPut(anchor, string(desc), clientv3.WithLease(spare.id))}, nil))
	}
	first := clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{
		clientv3.OpPut(anchor, string(desc), clientv3.WithLease(spare.id)),
		clientv3.OpPut(k.hold, val, clientv3.WithLease(spare.id)),
		// Hold keys of a lease that ended some other way than its
		// lease's end (a deletion behind the backends' backs) are no
		// holds: a new lease starts without them.
		clientv3.OpDelete(k.holds, clientv3.WithRange(k.hold)),
		clientv3.OpDelete(k.hold+"\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd(k.holds))),
	}, reads)
	// The replies: of a repeat (Then), the owner's hold and the anchor;
	// else those of first, whose own refusal (its Else) reads the anchor,
	// then the key's families, then, if it queues, puts the anchor.
	const (
		repeatHold    = 0
		repeatAnchor  = 1
		firstCheck    = 0
		refusedAnchor = 0
		refusedFamily = 1
		refusedQueued = refusedFamily + len(families)
	)
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.hold), "!=", 0),
	).Then(
		clientv3.OpGet(k.hold), clientv3.OpGet(anchor),
	).Else(first).Commit()
	if err != nil {
		// The spare may carry the anchor now: it is nobody's spare.
		if err = b.leaseErr(err, spare, "acquire", req.Key); errors.Is(err, errLeaseGone) {
			return driver.Grant{}, false, nil // not applied: another spare
		}
		return driver.Grant{}, false, err
	}
	if resp.Succeeded { // the owner's hold is there: a repeat
		b.putSpare(spare)
		return b.repeatHold(ctx, req, k, anchor, resp.Responses[repeatHold].GetResponseRange().Kvs, resp.Responses[repeatAnchor].GetResponseRange().Kvs, start)
	}
	inner := resp.Responses[firstCheck].GetResponseTxn()
	if inner.Succeeded { // the first hold: the spare is the identity's lease
		if err := b.keep(anchor, spare); err != nil {
			return driver.Grant{}, false, err
		}
		return b.grantedHold(req, k, anchor, resp.Header.Revision, spare, start)
	}
	rs := inner.Responses
	if queues(req) && rs[refusedQueued].GetResponseTxn().Succeeded { // the anchor put in line
		// In line: the spare is the identity's lease, kept alive while
		// the identity waits.
		if err := b.keep(anchor, spare); err != nil {
			return driver.Grant{}, false, err
		}
		b.waitHold(anchor, resp.Header.Revision)
		return driver.Grant{}, true, nil
	}
	b.putSpare(spare)
	if err := k.mismatch(req.Key, req.Kind, 0, rs[refusedFamily:refusedQueued]); err != nil {
		return driver.Grant{}, false, err
	}
	anc := rs[refusedAnchor].GetResponseRange().Kvs
	if len(anc) == 0 {
		return driver.Grant{}, true, nil // held by another
	}
	l, err := b.identityLease(ctx, anchor, anc[0])
	if errors.Is(err, errLeaseGone) {
		return driver.Grant{}, false, nil // the anchor ended with its lease
	}
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	return b.join(ctx, req, k, anchor, val, anc[0].CreateRevision, l, start)
}

// queues reports whether a re-entrant request waits in line for its first
// hold: a fair one that waits (Queue). The identity's place in line is
// its anchor, put alone: while the identity waits it has no hold keys,
// so the hold keys of the lock are all the holding identity's. Its
// owners that wait share the place; one that gives up deletes it (see
// dropPlace), and the others put it again at their next attempt.
func queues(req driver.Request) bool { return req.Fair && req.Queue > 0 }

// anchorFirst compares true if no key of k's line was created before
// rev, the anchor's create revision: the anchor holds the lock.
func anchorFirst(k keys, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(k.lock), ">", rev-1).WithPrefix()
}

// dropPlace deletes the anchor, created at rev, if it holds nothing: it
// is a place in line (not first), or first with no hold put yet.
func dropPlace(k keys, anchor string, rev int64) clientv3.Op {
	same := clientv3.Compare(clientv3.CreateRevision(anchor), "=", rev)
	del := []clientv3.Op{clientv3.OpDelete(anchor)}
	return clientv3.OpTxn([]clientv3.Cmp{same, anchorFirst(k, rev)},
		[]clientv3.Op{clientv3.OpTxn(othersAbsent(k.holds, nil), del, nil)},
		[]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{same}, del, nil)})
}

// repeatHold finishes an attempt that found the owner's hold key, hold,
// and the anchor as it is now, if it is.
func (b *Backend) repeatHold(ctx context.Context, req driver.Request, k keys, anchor string, hold, anc []*mvccpb.KeyValue, start time.Time) (driver.Grant, bool, error) {
	if len(hold) == 0 {
		return driver.Grant{}, false, fmt.Errorf("etcdlock: acquire %q: the owner's key vanished during the attempt", req.Key)
	}
	if len(anc) == 0 || anc[0].CreateRevision > hold[0].CreateRevision {
		// A hold of a lease that is gone: no holding. Take it away.
		_, err := b.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(k.hold), "=", hold[0].CreateRevision),
		).Then(clientv3.OpDelete(k.hold)).Commit()
		if err != nil {
			return driver.Grant{}, false, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
		}
		return driver.Grant{}, false, nil
	}
	l, err := b.identityLease(ctx, anchor, anc[0])
	if errors.Is(err, errLeaseGone) {
		return driver.Grant{}, false, nil
	}
	if err != nil {
		return driver.Grant{}, false, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	return b.grantedHold(req, k, anchor, anc[0].CreateRevision, l, start)
}

// join puts the owner's hold on the identity's lease l, if its anchor
// still has create revision rev. done is false if it has not: the caller
// looks again.
//
// The hold is put only while the anchor is first in line: an identity
// waiting in line (see queues) holds nothing, and its request is refused,
// or, if it queues, keeps waiting.
func (b *Backend) join(ctx context.Context, req driver.Request, k keys, anchor, val string, rev int64, l *lease, start time.Time) (driver.Grant, bool, error) {
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(anchor), "=", rev), anchorFirst(k, rev),
	).Then(
		clientv3.OpPut(k.hold, val, clientv3.WithLease(l.id)),
	).Else(
		clientv3.OpGet(anchor, clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		if err = b.leaseErr(err, l, "acquire", req.Key); errors.Is(err, errLeaseGone) {
			return driver.Grant{}, false, nil // the anchor ended with its lease
		}
		return driver.Grant{}, false, err
	}
	const refusedAnchor = 0 // Else: the anchor
	if !resp.Succeeded {
		if kvs := resp.Responses[refusedAnchor].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].CreateRevision == rev {
			if queues(req) {
				b.waitHold(anchor, rev)
			}
			return driver.Grant{}, true, nil // in line, not first
		}
		b.staleIdentity(anchor, rev)
		return driver.Grant{}, false, nil
	}
	return b.grantedHold(req, k, anchor, rev, l, start)
}

// grantedHold notes the owner's hold of the identity's lease l, whose anchor
// was created at rev, and returns its grant; done is true.
func (b *Backend) grantedHold(req driver.Request, k keys, anchor string, rev int64, l *lease, start time.Time) (driver.Grant, bool, error) {
	lost := b.grantHold(anchor, k.hold, rev, start.Add(req.TTL), l)
	v, err := l.validFor(start, req.TTL, b.drift)
	if err != nil {
		return driver.Grant{}, false, err // the caller releases
	}
	return driver.Grant{Acquired: true, Token: uint64(rev), ValidFor: v, Lost: lost}, true, nil
}

// releaseHold releases the owner's hold key in k, of the re-entrant lease
// of anchor: same tells that the anchor is the lease the hold is of. The
// last hold deletes the anchor too, and revokes the identity's lease,
// which carries nothing any more.
//
// The receipt notes rev, the token, if it is known (not 0).
func (b *Backend) releaseHold(ctx context.Context, l driver.Lease, k keys, anchor string, same clientv3.Cmp, rev int64, rl *lease) error {
	last := append(othersAbsent(k.holds, []string{k.hold}), same)
	const (
		releasedHold  = 0 // Then: the hold's key, before its deletion
		releasedLast  = 3 // Then: the anchor's deletion, if no other hold is left
		unheldReceipt = 0 // Else: the count of the owner's receipts
	)
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.hold), "!=", 0),
	).Then(
		clientv3.OpGet(k.hold, clientv3.WithKeysOnly()),
		clientv3.OpDelete(k.hold),
		receiptOp(k, anchor, rev, rl),
		clientv3.OpTxn(last, []clientv3.Op{clientv3.OpDelete(anchor)}, nil),
	).Else(
		clientv3.OpGet(k.receipt, clientv3.WithCountOnly()),
		placeOp(k, anchor, rev),
	).Commit()
	if err != nil {
		return b.leaseErr(err, rl, "release", l.Key)
	}
	if !resp.Succeeded {
		if resp.Responses[unheldReceipt].GetResponseRange().Count > 0 {
			return nil // released by an earlier call whose reply was lost
		}
		return driver.ErrNotHeld
	}
	if resp.Responses[releasedLast].GetResponseTxn().Succeeded {
		if kvs := resp.Responses[releasedHold].GetResponseRange().Kvs; len(kvs) > 0 {
			id := clientv3.LeaseID(kvs[0].Lease)
			b.goTracked(func() {
				ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
				defer cancel()
				_, _ = b.cli.Revoke(ctx, id)
			})
		}
	}
	return nil
}

// placeOp is dropPlace for an owner without a hold that may wait in line
// with the identity: with rev (0: unknown), it drops the identity's place.
func placeOp(k keys, anchor string, rev int64) clientv3.Op {
	if rev == 0 {
		return clientv3.OpGet(anchor, clientv3.WithCountOnly())
	}
	return dropPlace(k, anchor, rev)
}

// releaseUnknown releases a hold this backend has no record of, found
// by Release: hold is its key as read.
func (b *Backend) releaseUnknown(ctx context.Context, l driver.Lease, k keys, hold *mvccpb.KeyValue, rl *lease) error {
	var v holdValue
	if err := json.Unmarshal(hold.Value, &v); err != nil || v.Reentry == "" {
		return fmt.Errorf("etcdlock: release %q: a hold of another format", l.Key)
	}
	anchor := k.anchor(v.Reentry)
	// The anchor of the hold's lease was created with the first hold,
	// at the latest.
	same := clientv3.Compare(clientv3.CreateRevision(anchor), "<", hold.CreateRevision+1)
	return b.releaseHold(ctx, l, k, anchor, same, 0, rl)
}

// refreshHold is Refresh for a hold of the re-entrant lease of anchor: it
// extends the identity's deadline, which every hold of this backend
// shares, and checks that the hold is still there. The identity's lease
// is kept alive by the backend's keep-alive.
func (b *Backend) refreshHold(ctx context.Context, l driver.Lease, k keys, anchor string, ttl time.Duration, start time.Time) (time.Duration, error) {
	rev, ls := b.extendHold(anchor, k.hold, start.Add(ttl))
	if ls == nil {
		return 0, driver.ErrNotHeld
	}
	// The range op is what makes the check linearizable: etcd serves a
	// transaction with no operation as a serializable read, from whichever
	// member the client reached, which may not have applied a Break or a
	// release that has already returned.
	resp, err := hedge(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(k.hold), "!=", 0),
			clientv3.Compare(clientv3.CreateRevision(anchor), "=", rev),
		).Then(clientv3.OpGet(anchor, clientv3.WithCountOnly())).Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
	}
	if !resp.Succeeded {
		b.dropHold(k.hold)
		return 0, driver.ErrNotHeld
	}
	if time.Until(ls.deadline()) < min(ttl, time.Duration(ls.ttl)*time.Second) {
		// The keep-alive is late (or failing): renew now, or fail.
		if err := ls.renew(ctx); err != nil {
			return 0, fmt.Errorf("etcdlock: refresh %q: %w", l.Key, err)
		}
	}
	return ls.validFor(start, ttl, b.drift)
}

// extendHold extends the deadline of the identity of anchor to at, if
// that is later, if hold is one of its holds that the backend keeps, and
// returns the anchor's create revision and the identity's lease; 0 and nil
// if it keeps no such hold.
func (b *Backend) extendHold(anchor, hold string, at time.Time) (int64, *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[anchor]
	if d == nil || d.holds == nil || !d.holds[hold] || d.phaseLocked() != phaseHolding || d.rev == 0 {
		return 0, nil
	}
	d.extendLocked(at)
	return d.rev, d.on[0]
}

// othersAbsent compares true if no key with prefix exists but those of
// mine (sorted).
func othersAbsent(prefix string, mine []string) []clientv3.Cmp {
	var cmps []clientv3.Cmp
	from := prefix
	for _, m := range mine {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(from), "=", 0).WithRange(m))
		from = m + "\x00"
	}
	return append(cmps, clientv3.Compare(clientv3.CreateRevision(from), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(prefix)))
}

// takeSpare returns a lease of TTL secs for a new re-entrant lease, the
// caller's alone: the spare left by a refused attempt if it is fresh (at
// most a third of its TTL used), else a new one.
func (b *Backend) takeSpare(ctx context.Context, secs int64) (*lease, error) {
	b.mu.Lock()
	l := b.spares[secs]
	delete(b.spares, secs)
	b.mu.Unlock()
	if l != nil && time.Until(l.deadline()) > time.Duration(l.ttl)*time.Second*2/3 {
		return l, nil
	}
	l, err := b.grant(ctx, secs)
	if err != nil {
		return nil, err
	}
	l.stop = make(chan struct{})
	return l, nil
}

// putSpare keeps l, unused, for the next attempt.
func (b *Backend) putSpare(l *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spares == nil {
		b.spares = make(map[int64]*lease)
	}
	if old := b.spares[l.secs]; old != nil {
		old.dropLocked()
	}
	b.spares[l.secs] = l
}

// identityLease returns the identity's lease that kv, its anchor, is on,
// kept alive by this backend: the one it keeps already, or, renewed once
// to learn how long it lasts, a new keep-alive. errLeaseGone says that
// etcd no longer has it (nor the anchor).
func (b *Backend) identityLease(ctx context.Context, anchor string, kv *mvccpb.KeyValue) (*lease, error) {
	id := clientv3.LeaseID(kv.Lease)
	if l := b.identityOn(anchor, id); l != nil && l.alive() {
		return l, nil
	}
	if id == clientv3.NoLease {
		return nil, errors.New("the re-entrant lease's anchor is on no etcd lease")
	}
	sent := time.Now()
	resp, err := b.cli.KeepAliveOnce(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		return nil, errLeaseGone
	case err != nil:
		return nil, fmt.Errorf("keep the re-entrant lease alive: %w", err)
	}
	l := &lease{b: b, id: id, secs: resp.TTL, ttl: resp.TTL, until: sent.Add(time.Duration(resp.TTL) * time.Second),
		lost: make(chan struct{}), stop: make(chan struct{})}
	if err := b.keep(anchor, l); err != nil {
		return nil, err
	}
	if kept := b.identityOn(anchor, id); kept != nil {
		return kept, nil // l, or the same lease kept meanwhile
	}
	return l, nil // superseded: the grant will say the hold is lost
}

// identityOn returns the lease of the identity of anchor that the backend
// keeps, if it is lease id; nil otherwise.
func (b *Backend) identityOn(anchor string, id clientv3.LeaseID) *lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[anchor]; d != nil && len(d.on) > 0 && d.on[0].id == id {
		return d.on[0]
	}
	return nil
}

// keep makes l the identity's lease in the record of anchor (armed by
// the attempt), and keeps it alive, unless the record has that lease
// alive already. A record on another lease was of a lease that ended: its
// holds are told they are lost.
func (b *Backend) keep(anchor string, l *lease) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[anchor]
	if d == nil || d.holds == nil {
		return fmt.Errorf("etcdlock: the hold's deadline vanished during the attempt")
	}
	if len(d.on) > 0 && d.on[0].id == l.id && d.on[0].alive() {
		return nil
	}
	if !b.goLocked(func() { b.keepAlive(l) }) {
		return errClosed
	}
	for _, old := range d.on {
		old.unkeepLocked()
	}
	d.endLocked()
	d.on, d.rev, d.lost = []*lease{l}, 0, make(chan struct{})
	return nil
}

// armHold notes, before an attempt is sent, that the owner's hold key
// hold may be put under the re-entrant lease of anchor, and makes the
// identity's deadline at least at. It waits if the identity's holds are
// being deleted for a passed deadline.
func (b *Backend) armHold(ctx context.Context, anchor, hold string, at time.Time) error {
	return b.whenSettled(ctx, anchor, func(d *deadline) {
		switch {
		case d == nil:
			d = b.newDeadlineLocked(anchor, 0, at)
			d.holds = make(map[string]bool)
		default:
			d.extendLocked(at)
		}
		d.holds[hold] = true
		if b.reholds == nil {
			b.reholds = make(map[string]string)
		}
		b.reholds[hold] = anchor
	})
}

// knownIdentity returns the create revision of the anchor and the lease
// of the identity's holds this backend has, if it has live ones.
func (b *Backend) knownIdentity(anchor string) (int64, *lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[anchor]
	if d == nil || d.holds == nil || !d.grantedLocked() || d.rev == 0 || !d.on[0].alive() {
		return 0, nil
	}
	return d.rev, d.on[0]
}

// waitHold notes that the identity's anchor, created at rev, is its
// place in line.
func (b *Backend) waitHold(anchor string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[anchor]; d != nil && d.holds != nil && d.phaseLocked() != phaseLapsing {
		d.rev = rev
	}
}

// staleIdentity notes that the anchor created at rev is gone.
func (b *Backend) staleIdentity(anchor string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deadlines[anchor]; d != nil && d.rev == rev {
		d.rev = 0
	}
}

// grantHold notes that hold was granted on the identity's lease l, whose
// anchor was created at rev, and extends the identity's deadline to at.
// It returns the channel that closes when the backend's holds of the
// identity end.
func (b *Backend) grantHold(anchor, hold string, rev int64, at time.Time, l *lease) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deadlines[anchor]
	if d == nil || d.holds == nil || !d.grantedLocked() || d.on[0].id != l.id {
		// Being deleted for a passed deadline, or superseded by a newer
		// lease of the identity: this hold is gone already. (The same
		// lease may be kept under another value: a concurrent attempt
		// found it first.)
		return closedChan()
	}
	d.rev = rev
	d.holds[hold] = true
	b.reholds[hold] = anchor
	d.extendLocked(at)
	if d.on[0].gone() {
		d.endLocked()
	}
	return d.lost
}

// holdAnchor returns the anchor of the re-entrant lease that this
// backend's record lists hold under, and the anchor's create revision
// (0: not known), or "".
func (b *Backend) holdAnchor(hold string) (string, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	anchor := b.reholds[hold]
	if d := b.deadlines[anchor]; anchor != "" && d != nil {
		return anchor, d.rev
	}
	return anchor, 0
}

// dropHold takes hold out of its identity's record: released, refused or
// known not to exist. The record goes with its last hold, and the
// backend stops keeping the identity's lease alive.
func (b *Backend) dropHold(hold string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	anchor, ok := b.reholds[hold]
	if !ok {
		return
	}
	d := b.deadlines[anchor]
	if d == nil || d.holds == nil || d.phaseLocked() == phaseLapsing {
		return // a deletion under way finishes, and drops it
	}
	delete(b.reholds, hold)
	delete(d.holds, hold)
	if len(d.holds) == 0 {
		d.timer.Stop()
		delete(b.deadlines, anchor)
		for _, l := range d.on {
			l.unkeepLocked()
		}
	}
}

// lapseIdentityLocked deletes, once the identity's deadline d has passed, the
// hold keys this backend put, and the anchor, key, if no other hold key
// is left. b.mu must be held, and d.lapsing just set.
func (b *Backend) lapseIdentityLocked(key string, d *deadline) {
	holds := slices.Sorted(maps.Keys(d.holds))
	doneLocked := func() {
		if b.deadlines[key] == d {
			delete(b.deadlines, key)
		}
		for _, h := range holds {
			if b.reholds[h] == key {
				delete(b.reholds, h)
			}
		}
		for _, l := range d.on {
			l.unkeepLocked()
		}
		close(d.lapsing)
	}
	if len(holds) == 0 { // dropHold removes a record with its last hold
		doneLocked()
		return
	}
	prefix := holds[0][:strings.LastIndexByte(holds[0], '/')+1]
	last := othersAbsent(prefix, holds)
	if d.rev != 0 {
		last = append(last, clientv3.Compare(clientv3.CreateRevision(key), "=", d.rev))
	}
	// The anchor of an unknown revision (no reply told it) is deleted
	// only when every hold key is this backend's: then it is the one
	// this backend made, or one whose holds all lapse now.
	var dels []clientv3.Op
	for _, h := range holds {
		dels = append(dels, clientv3.OpDelete(h))
	}
	// key is the anchor: k.lock + "m/" + anchorMark + digest.
	place := placeOp(keys{lock: key[:strings.LastIndex(key, "m/"+anchorMark)], holds: prefix}, key, d.rev)
	started := b.goLocked(func() {
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			doneLocked()
		}()
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			_, err := b.cli.Txn(ctx).If(last...).Then(append(dels, clientv3.OpDelete(key))...).Else(append(dels, place)...).Commit()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	if !started { // closed: the identity's lease, no longer kept alive by this backend, ends them
		doneLocked()
	}
}

// unkeepLocked stops the keep-alive of an identity's lease; b.mu must be
// held.
func (l *lease) unkeepLocked() {
	if l.stop != nil && !l.stopped {
		l.stopped = true
		close(l.stop)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
