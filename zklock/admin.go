package zklock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
)

// Inspect implements driver.Backend. The remaining lease it reports is
// estimated on the leader's clock as this client last saw it.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := checkKey(key); err != nil {
		return driver.Info{}, err
	}
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	return run(ctx, func() (driver.Info, error) { return b.inspect(key) })
}

func (b *Backend) inspect(key string) (driver.Info, error) {
	info, _, err := b.holdings(key)
	return info, err
}

// holdings describes key, and returns the nodes that hold it.
func (b *Backend) holdings(key string) (driver.Info, []string, error) {
	parent := b.linePath(key)
	// A server reads its own copy, which may lag behind the leader: sync
	// it first, so that Inspect sees every change made before it began.
	if _, err := b.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return driver.Info{}, nil, err
	}
	raw, _, err := b.conn.Get(keyNode(parent))
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Info{}, nil, nil
	}
	if err != nil {
		return driver.Info{}, nil, err
	}
	last, _ := strconv.ParseUint(string(raw), 10, 64)
	info := driver.Info{Token: last}
	names, _, err := b.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) { // the line was left empty, and deleted
		return info, nil, nil
	}
	if err != nil {
		return driver.Info{}, nil, err
	}
	kids := line(names)
	datas := make(map[string]nodeData)
	stats := make(map[string]*zk.Stat)
	get := func(c child) (nodeData, bool) {
		if d, ok := datas[c.name]; ok {
			return d, true
		}
		raw, st, err := b.conn.Get(parent + "/" + c.name)
		if err != nil {
			return nodeData{}, false
		}
		datas[c.name], stats[c.name] = decodeData(raw), st
		return datas[c.name], true
	}
	now := b.leaderNow()
	var newest nodeData
	var paths []string
	limit := func(c child) int {
		if c.limit > 0 {
			return c.limit
		}
		d, _ := get(c)
		return d.Limit
	}
	for _, c := range holders(kids, limit) {
		d, ok := get(c)
		// The first node of a mutex or a writer holds the lock, granted
		// or not yet: its owner takes it without asking the ensemble
		// again (see handedOver).
		if !ok || !d.Held && (c.reentrant || c.kind != driver.Exclusive && c.kind != driver.Write) {
			continue
		}
		st := stats[c.name]
		left := time.Duration(st.Mtime+d.Span-now) * time.Millisecond
		if left <= 0 {
			continue // lapsed: the next attempt removes it
		}
		paths = append(paths, parent+"/"+c.name)
		info.Held, info.Kind = true, c.kind
		if c.kind == driver.Permit {
			info.Limit = limit(c)
		}
		info.Holds += max(len(d.Holds), 1)
		info.TTL = max(info.TTL, min(left, time.Duration(d.Span)*time.Millisecond))
		if tok := uint64(st.Czxid); tok >= info.Token || info.Holds == 1 {
			info.Token, newest = tok, d
		}
	}
	if !info.Held {
		return driver.Info{Token: last}, nil, nil
	}
	info.Meta = make(map[string]string, len(newest.Meta)+1)
	for k, v := range newest.Meta {
		info.Meta[k] = v
	}
	info.Meta["since"] = strconv.FormatInt(newest.Since, 10)
	return info, paths, nil
}

// List implements driver.Backend: the root's children are the keys ever
// locked; each one whose name begins with prefix is inspected.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return run(ctx, func() ([]driver.KeyInfo, error) {
		if _, err := b.conn.Sync(b.root); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		names, _, err := b.conn.Children(b.root)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var keys []string
		for _, n := range names {
			if key, ok := unescapeKey(n); ok && strings.HasPrefix(key, prefix) {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		return keylist.Held(ctx, keys, func(_ context.Context, key string) (driver.Info, error) { return b.inspect(key) })
	})
}

// Break implements driver.Backend: it deletes the nodes of the holdings,
// which wakes the waiters watching them, and keeps the broken holding's
// token as the key's last one. Waiters keep their nodes, and their places.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := checkKey(key); err != nil {
		return driver.Info{}, err
	}
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	return run(ctx, func() (driver.Info, error) {
		info, paths, err := b.holdings(key)
		if err != nil || !info.Held {
			return info, err
		}
		for _, p := range paths {
			if err := b.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Info{}, err
			}
		}
		kn := keyNode(b.linePath(key))
		for {
			raw, st, err := b.conn.Get(kn)
			if errors.Is(err, zk.ErrNoNode) { // left empty, and deleted
				return info, nil
			}
			if err != nil {
				return driver.Info{}, err
			}
			if last, _ := strconv.ParseUint(string(raw), 10, 64); last >= info.Token {
				return info, nil
			}
			_, err = b.conn.Set(kn, []byte(strconv.FormatUint(info.Token, 10)), st.Version)
			if !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNoNode) {
				return info, err
			}
		}
	})
}

// unescapeKey undoes escapeKey; ok is false for names it never makes
// (the clock node).
func unescapeKey(name string) (string, bool) {
	if strings.HasPrefix(name, ".") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
