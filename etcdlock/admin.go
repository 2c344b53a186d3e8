package etcdlock

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

// Inspect implements driver.Backend. The remaining lease it reports is
// the etcd lease's, in whole seconds as etcd counts them.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := b.check(); err != nil {
		return driver.Info{}, err
	}
	if err := checkKey("inspect", key); err != nil {
		return driver.Info{}, err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	k := b.keys(key, "", driver.Exclusive, 0)
	const (
		inspectedLine     = 0 // the key's line, in order
		inspectedReceipts = 1 // the receipts of its releases
		inspectedHolds    = 2 // the holds of its re-entrant leases
	)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.lock, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(k.receipts(), clientv3.WithPrefix()),
		clientv3.OpGet(k.holds, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: inspect %q: %w", key, err)
	}
	holds := holders(k, resp.Responses[inspectedLine].GetResponseRange().Kvs)
	if len(holds) == 0 {
		// The last token, while the receipts of its release last.
		var token uint64
		for _, kv := range resp.Responses[inspectedReceipts].GetResponseRange().Kvs {
			if t, err := strconv.ParseUint(string(kv.Value), 10, 64); err == nil {
				token = max(token, t)
			}
		}
		return driver.Info{Token: token}, nil
	}
	return b.describe(ctx, k, key, holds, resp.Responses[inspectedHolds].GetResponseRange().Kvs, make(map[int64]time.Duration))
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
	if h.Kind == driver.Permit {
		info.Limit = k.permitLimit(newest.Key)
	}
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
	const (
		listedLines = 0 // the keys' lines
		listedHolds = 1 // the holds of their re-entrant leases
	)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(root+url.PathEscape(prefix), clientv3.WithPrefix()),
		clientv3.OpGet(holdRoot+url.PathEscape(prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdlock: list %q: %w", prefix, err)
	}
	byKey := groupByKey(root, resp.Responses[listedLines].GetResponseRange().Kvs)
	nested := groupByKey(holdRoot, resp.Responses[listedHolds].GetResponseRange().Kvs)
	var list []driver.KeyInfo
	ttls := make(map[int64]time.Duration)
	for esc, kvs := range byKey {
		key, err := url.PathUnescape(esc)
		if err != nil || !strings.HasPrefix(key, prefix) {
			continue // not a key this package wrote
		}
		slices.SortFunc(kvs, func(x, y *mvccpb.KeyValue) int { return cmp.Compare(x.CreateRevision, y.CreateRevision) })
		k := b.keys(key, "", driver.Exclusive, 0)
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
	if err := checkKey("break", key); err != nil {
		return driver.Info{}, err
	}
	ctx, cancel := b.call(ctx, 0)
	defer cancel()
	k := b.keys(key, "", driver.Exclusive, 0)
	const (
		brokenLine  = 0 // the key's line, in order
		brokenHolds = 1 // the holds of its re-entrant leases
	)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.lock, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(k.holds, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: break %q: %w", key, err)
	}
	holds := holders(k, resp.Responses[brokenLine].GetResponseRange().Kvs)
	if len(holds) == 0 {
		return b.Inspect(ctx, key)
	}
	info, err := b.describe(ctx, k, key, holds, resp.Responses[brokenHolds].GetResponseRange().Kvs, make(map[int64]time.Duration))
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
			case "m/", "w/", "r/", "p/":
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
	case "m/", "w/":
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
