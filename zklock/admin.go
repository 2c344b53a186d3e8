package zklock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
)

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
