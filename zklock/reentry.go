package zklock

import (
	"errors"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
)

// A re-entrant lease (driver.Request.Reentry) is one node shared by the
// holds of its identity, named e-hash-sequence after the identity's hash.
// Its data lists the holds, and the waiters keeping a place, by owner
// hash, each with its own lease length. The first hold creates the node;
// the others join it with a write conditional on its version, so every
// hold has the node's token, and the last one to leave deletes it. The
// node is persistent, not ephemeral: holds may come from several clients
// (a hand-over), and it must not end with the session of whichever made
// it. Its lease, the longest of its holds', counted from its last write
// on the leader's clock, ends it if its holders stop renewing.

// reentryRounds bounds the rounds of one attempt that other holds of the
// same identity keep changing the node under.
const reentryRounds = 10

// acquireReentrant is acquire for a request with a re-entrant identity.
// It lists the line first (one round trip more than acquire), so that it
// finds the identity's node, and makes none when it would be refused.
func (b *Backend) acquireReentrant(req driver.Request) (driver.Grant, error) {
	parent := b.linePath(req.Key)
	lk := req.ID()
	rh, oh := reentryHash(req.Reentry), ownerHash(req.Owner)
	made := "" // the node this call made as a holding, if any
	// The line is read before this call writes anything, so the server may
	// show it as it was before changes other clients already made (a
	// release): a refusal seen so is confirmed after a sync.
	synced, syncNext := false, false
	for range reentryRounds {
		e, known := b.entry(lk)
		if known && e.path == "" || syncNext {
			// A write whose reply was lost, or a refusal to confirm: sync,
			// or a lagging server may not show the changes.
			if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, err
			}
			synced, syncNext = true, false
		}
		names, _, err := b.conn.Children(parent)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, err
		}
		kids := line(names)
		var ids []int // the identity's nodes: one, unless two were made at once
		for i, c := range kids {
			if c.reentrant && c.hash == rh {
				ids = append(ids, i)
			}
		}
		mine := -1 // the node that lists this owner
		switch {
		case known && e.path != "":
			mine = slices.IndexFunc(kids, func(c child) bool { return parent+"/"+c.name == e.path })
		case known:
			for _, i := range ids {
				raw, _, err := b.conn.Get(parent + "/" + kids[i].name)
				if errors.Is(err, zk.ErrNoNode) {
					continue
				}
				if err != nil {
					return driver.Grant{}, err
				}
				if d := decodeData(raw); d.lists(oh) {
					mine = i
					break
				}
			}
		}
		if known && mine < 0 {
			b.forget(lk) // gone: it lapsed, was broken, or was never made
		}
		if mine >= 0 && mine != ids[0] {
			// A second node of the identity: leave it for the first.
			if _, _, err := b.removeHold(parent, parent+"/"+kids[mine].name, oh, false); err != nil {
				return driver.Grant{}, err
			}
			b.forget(lk)
			continue
		}
		ahead := kids // the line before the node the request holds or would join
		switch {
		case mine >= 0:
			ahead = kids[:mine]
		case len(ids) > 0:
			ahead = kids[:ids[0]]
		}
		if fs := foreign(ahead, driver.Exclusive, 0); len(fs) > 0 {
			var now int64
			freed, _, err := b.clearLapsed(parent, fs, kids[0].seq, &now, lookNow)
			if err != nil {
				return driver.Grant{}, err
			}
			if freed {
				continue
			}
			if !synced {
				syncNext = true
				continue
			}
			if mine >= 0 {
				if _, _, err := b.removeHold(parent, parent+"/"+kids[mine].name, oh, false); err != nil {
					return driver.Grant{}, err
				}
			}
			b.forget(lk)
			return driver.Grant{}, kindError(req, fs[0])
		}
		var g driver.Grant
		var done bool
		switch {
		case mine == 0 && e.path == made && made != "":
			// Made as a holding by this call, and heading the line: no
			// other node came first.
			b.setRefused(lk, false)
			return driver.Grant{Acquired: true, Token: e.token, ValidFor: b.validForLease(req.TTL)}, nil
		case len(ids) == 0 && len(kids) > 0 && req.Queue <= 0 && !synced && made == "":
			syncNext = true
			continue
		case len(ids) == 0:
			g, done, err = b.createReentrant(lk, req, parent, rh, oh, kids)
			if n, ok := b.entry(lk); err == nil && ok && n.data.Held {
				made = n.path
			}
		default:
			g, done, err = b.joinReentrant(lk, req, parent, rh, oh, kids, ids[0])
		}
		if err != nil || done {
			return g, err
		}
	}
	return driver.Grant{}, errors.New("zklock: the re-entrant lease kept changing; retry")
}

// createReentrant makes the identity's node, as a holding if the line is
// empty, else as a place in line if the request keeps one. done is false
// when the caller should look at the line again.
func (b *Backend) createReentrant(lk driver.LeaseID, req driver.Request, parent, rh, oh string, kids []child) (g driver.Grant, done bool, err error) {
	blocked := len(kids) > 0
	if blocked && req.Queue <= 0 {
		return b.refuseReentrant(lk, parent, kids)
	}
	data := nodeData{Since: time.Now().UnixMilli(), Meta: req.Meta}
	if blocked {
		data.Waits = map[string]int64{oh: ms(req.Queue)}
	} else {
		data.Holds = map[string]int64{oh: ms(req.TTL)}
	}
	data.settle()
	_, err = b.create(lk, parent, reentrantPrefix+"-"+rh+"-", data, zk.FlagSequence, rh)
	return driver.Grant{}, false, err // look again: another node may have come first
}

// refuseReentrant ends an attempt that keeps no place and is blocked by
// the nodes bs, after clearing the lapsed ones (done false: look again).
func (b *Backend) refuseReentrant(lk driver.LeaseID, parent string, bs []child) (g driver.Grant, done bool, err error) {
	var now, head int64
	if len(bs) > 0 {
		head = bs[0].seq // bs is the line from its start
	}
	freed, until, err := b.clearLapsed(parent, bs, head, &now, lookNow)
	if err != nil || freed {
		return driver.Grant{}, false, err
	}
	if now == 0 {
		now = b.leaderNow()
	}
	b.setRefused(lk, true)
	return driver.Grant{RetryAfter: max(time.Duration(until-now)*time.Millisecond, time.Millisecond)}, true, nil
}

// joinReentrant enters the owner in the identity's node, kids[i]: as a
// hold if the node heads the line, else as a waiter keeping its place
// (req.Queue > 0); an attempt that keeps no place leaves it. done is
// false when the caller should look at the line again.
func (b *Backend) joinReentrant(lk driver.LeaseID, req driver.Request, parent, rh, oh string, kids []child, i int) (g driver.Grant, done bool, err error) {
	path := parent + "/" + kids[i].name
	raw, st, err := b.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Grant{}, false, nil
	}
	if err != nil {
		return driver.Grant{}, false, err
	}
	old, d := decodeData(raw), decodeData(raw)
	if d.Holds == nil {
		d.Holds = make(map[string]int64)
	}
	if d.Waits == nil {
		d.Waits = make(map[string]int64)
	}
	switch {
	case i == 0:
		if len(old.Holds) == 0 { // a new holding, not one more hold
			d.Since, d.Meta = time.Now().UnixMilli(), req.Meta
		}
		d.Holds[oh] = ms(req.TTL)
		delete(d.Waits, oh)
	case req.Queue > 0:
		d.Waits[oh] = ms(req.Queue)
		delete(d.Holds, oh)
	default:
		if old.lists(oh) {
			if _, _, err := b.removeHold(parent, path, oh, false); err != nil {
				return driver.Grant{}, false, err
			}
		}
		b.forget(lk)
		return b.refuseReentrant(lk, parent, kids[:i])
	}
	d.settle()
	if e, ok := b.entry(lk); !ok || e.path != path {
		b.remember(lk, &node{reentry: rh}) // uncertain until the reply comes
	}
	nst, err := b.conn.Set(path, d.encode(), st.Version)
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return driver.Grant{}, false, nil
	}
	if err != nil {
		return driver.Grant{}, false, err
	}
	b.noteClock(nst.Mtime)
	n := &node{path: path, token: uint64(st.Czxid), version: nst.Version, data: d, reentry: rh}
	if st.Mtime+old.Span <= nst.Mtime {
		// Its lease had lapsed before this write: it ended, and the
		// identity's next holding is a new one, with a new token.
		n.data = old
		if err := b.deleteNode(parent, n, nst.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return driver.Grant{}, false, err
		}
		b.forget(lk)
		return driver.Grant{}, false, nil
	}
	b.remember(lk, n)
	if i == 0 {
		b.setRefused(lk, false)
		return driver.Grant{Acquired: true, Token: n.token, ValidFor: b.validForLease(req.TTL)}, true, nil
	}
	now := nst.Mtime
	freed, until, err := b.clearLapsed(parent, kids[:i], kids[0].seq, &now, lookNow)
	if err != nil || freed {
		return driver.Grant{}, false, err
	}
	return driver.Grant{RetryAfter: max(time.Duration(until-now)*time.Millisecond, time.Millisecond)}, true, nil
}

// validForLease is how long after a call that reached the ensemble a
// lease of ttl on a persistent node is trusted: no session ends it.
func (b *Backend) validForLease(ttl time.Duration) time.Duration {
	return max(ttl-b.drift(ttl), time.Millisecond)
}

// lists reports whether a re-entrant lease's node lists the owner of
// hash oh, as a hold or a waiter.
func (d nodeData) lists(oh string) bool {
	_, held := d.Holds[oh]
	_, waits := d.Waits[oh]
	return held || waits
}

// findReentrant returns the path of the identity's node that lists the
// owner of hash oh, or "".
func (b *Backend) findReentrant(parent, rh, oh string) (string, error) {
	if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", err
	}
	names, _, err := b.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range line(names) {
		if !c.reentrant || c.hash != rh {
			continue
		}
		raw, _, err := b.conn.Get(parent + "/" + c.name)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", err
		}
		if decodeData(raw).lists(oh) {
			return parent + "/" + c.name, nil
		}
	}
	return "", nil
}

// removeHold takes the owner of hash oh out of the node at path, and
// deletes the node if no one is left in it; the token of a holding
// (granted: the node held the lock) becomes the key's last. It reports
// whether the owner was listed, and as a hold, even with an error: the
// removal may have been applied.
func (b *Backend) removeHold(parent, path, oh string, granted bool) (listed, hold bool, err error) {
	for {
		raw, st, err := b.conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			return false, false, nil
		}
		if err != nil {
			return false, false, err
		}
		old, d := decodeData(raw), decodeData(raw)
		if !d.lists(oh) {
			return false, false, nil
		}
		_, hold = d.Holds[oh]
		delete(d.Holds, oh)
		delete(d.Waits, oh)
		d.settle()
		if len(d.Holds)+len(d.Waits) == 0 {
			old.Held = old.Held && granted
			err = b.deleteNode(parent, &node{path: path, token: uint64(st.Czxid), data: old}, st.Version)
		} else {
			_, err = b.conn.Set(path, d.encode(), st.Version)
		}
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue // another hold changed it: read it again
		case errors.Is(err, zk.ErrNoNode):
			return false, false, nil
		}
		return true, hold, err
	}
}

// releaseReentrant is release for a hold of a re-entrant lease, e.
func (b *Backend) releaseReentrant(l driver.Lease, parent string, e node) error {
	lk := l.ID()
	path := e.path
	if path == "" {
		var err error
		if path, err = b.findReentrant(parent, e.reentry, ownerHash(l.Owner)); err != nil {
			return err
		}
	}
	if path == "" {
		b.forget(lk)
		return b.notHeld(l)
	}
	listed, hold, err := b.removeHold(parent, path, ownerHash(l.Owner), true)
	if err != nil {
		if hold {
			b.receipt(l) // if it was applied, the repeat finds the hold gone
		}
		return err
	}
	b.forget(lk)
	switch {
	case !listed:
		return b.notHeld(l)
	case !hold: // a waiter left the line: it held nothing
		return driver.ErrNotHeld
	}
	b.receipt(l)
	return nil
}

// refreshReentrant is Refresh for a hold of a re-entrant lease, e: it
// sets the hold's lease to ttl, which restarts the node's lease (the
// longest of its holds').
func (b *Backend) refreshReentrant(lk driver.LeaseID, parent string, e node, ttl time.Duration) (time.Duration, error) {
	oh := ownerHash(lk.Owner)
	path := e.path
	if path == "" {
		var err error
		if path, err = b.findReentrant(parent, e.reentry, oh); err != nil {
			return 0, err
		}
	}
	for path != "" {
		raw, st, err := b.conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			break
		}
		if err != nil {
			return 0, err
		}
		old, d := decodeData(raw), decodeData(raw)
		if _, ok := d.Holds[oh]; !ok {
			break
		}
		d.Holds[oh] = ms(ttl)
		d.settle()
		nst, err := b.conn.Set(path, d.encode(), st.Version)
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue
		case errors.Is(err, zk.ErrNoNode):
			path = ""
			continue
		case err != nil:
			return 0, err
		}
		b.noteClock(nst.Mtime)
		n := &node{path: path, token: uint64(st.Czxid), version: nst.Version, data: d, reentry: e.reentry}
		if st.Mtime+old.Span <= nst.Mtime { // it had lapsed: the lease ended
			n.data = old
			if err := b.deleteNode(parent, n, nst.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return 0, err
			}
			break
		}
		b.remember(lk, n)
		return b.validForLease(ttl), nil
	}
	b.forget(lk)
	return 0, driver.ErrNotHeld
}
