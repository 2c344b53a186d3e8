package etcdlock

import (
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// A key's family is written in the names of its holdings and waiters:
// mutexes (re-entrant ones too) under m/, writers under w/, readers under
// r/, the permits of a semaphore of n under p/<n>/. Every transaction
// that puts a holding or a place in line also compares that no key of
// another family (or another n) exists, so the check and the grant are
// one step: of two requests of different families at once, at most one
// is granted. An owner's own key passes the check once it is put, since
// keys of another family could not be put while it exists.

// families are the name prefixes of the families, in the order
// heldFamily reads them.
var families = [...]struct {
	prefix string
	kind   driver.Kind
}{{"m/", driver.Exclusive}, {"w/", driver.Write}, {"r/", driver.Read}, {"p/", driver.Permit}}

// compatible compares true if no key of another family than kind's (for
// a permit, of another semaphore size than limit) is in k's line.
func (k keys) compatible(kind driver.Kind, limit int) []clientv3.Cmp {
	absent := func(prefix string) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(k.lock+prefix), "=", 0).WithPrefix()
	}
	var cmps []clientv3.Cmp
	for _, f := range families {
		switch {
		case f.kind == driver.Permit && kind == driver.Permit:
			// Other sizes: the permits named before and after this size's.
			sub := k.lock + subprefix(kind, limit)
			cmps = append(cmps,
				clientv3.Compare(clientv3.CreateRevision(k.lock+f.prefix), "=", 0).WithRange(sub),
				clientv3.Compare(clientv3.CreateRevision(clientv3.GetPrefixRangeEnd(sub)), "=", 0).
					WithRange(clientv3.GetPrefixRangeEnd(k.lock+f.prefix)))
		case f.kind.Family() != kind.Family():
			cmps = append(cmps, absent(f.prefix))
		}
	}
	return cmps
}

// familyReads read what heldFamily needs: a key of each family, if any.
func (k keys) familyReads() []clientv3.Op {
	ops := make([]clientv3.Op, 0, len(families))
	for _, f := range families {
		ops = append(ops, clientv3.OpGet(k.lock+f.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	}
	return ops
}

// mismatch returns the *driver.KindError for a request of kind (and
// limit) refused because its key is held as another family, as rs, the
// answers to familyReads, show; nil if they show none in the way.
func (k keys) mismatch(key string, kind driver.Kind, limit int, rs []*pb.ResponseOp) error {
	for i, f := range families {
		if i >= len(rs) {
			break
		}
		kvs := rs[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		held, heldLimit := f.kind.Family(), 0
		if f.kind == driver.Permit {
			rest := strings.TrimPrefix(string(kvs[0].Key), k.lock+f.prefix)
			if n, _, ok := strings.Cut(rest, "/"); ok {
				heldLimit, _ = strconv.Atoi(n)
			}
		}
		if !driver.Compatible(held, heldLimit, kind, limit) {
			return &driver.KindError{Key: key, Held: held, HeldLimit: heldLimit, Asked: kind, AskedLimit: limit}
		}
	}
	return nil
}

// permitLimit returns the semaphore size named in kv, a permit's key in
// k's line, or 0.
func (k keys) permitLimit(kv []byte) int {
	rest, ok := strings.CutPrefix(string(kv), k.lock+"p/")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, "/")
	limit, _ := strconv.Atoi(n)
	return limit
}
