package memlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// Inspect implements driver.Backend.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return b.examine(ctx, key, false)
}

// examine returns what Inspect reports about key and, if breaking, ends
// every holding of key and wakes its waiters.
func (b *Backend) examine(ctx context.Context, key string, breaking bool) (driver.Info, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.Info{}, fmt.Errorf("memlock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	defer b.mu.Unlock()
	info := driver.Info{Token: b.lastly.get(key, time.Now())}
	s := b.keys[key]
	if s == nil {
		return info, nil
	}
	if s.token > 0 {
		info.Token = s.token
	}
	now := time.Now()
	defer b.settleLocked(key, s, now)
	s.prune(now)
	if len(s.holds) > 0 {
		info = s.info(now)
		if breaking {
			clear(s.holds)
			s.wake = true
		}
	}
	return info, nil
}

// List implements driver.Backend.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := time.Now()
	var list []driver.KeyInfo
	for key, s := range b.keys {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		s.prune(now)
		if len(s.holds) > 0 {
			list = append(list, driver.KeyInfo{Key: key, Info: s.info(now)})
		}
		b.settleLocked(key, s, now)
	}
	slices.SortFunc(list, func(a, b driver.KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return list, nil
}

// Break implements driver.Backend.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	return b.examine(ctx, key, true)
}

// Expire ends every holding of key at once (the lock, its readers or its
// permits), as if their TTL had run out: the holders are not told, and
// their next renewal is refused. It exists for tests of code that must
// survive losing a lock.
func (b *Backend) Expire(key string) {
	_, _ = b.Break(context.Background(), key)
}

// Stored lists what b keeps about the keys whose names begin with prefix,
// after dropping what lapsed: the state of keys held or waited for, the
// last token of keys freed lately, release receipts and watches. A key
// nobody holds or waits for leaves nothing after about 10s. It is for
// tests that check that a program leaves no lock behind (and for
// distlocktest.Harness.Stored).
func (b *Backend) Stored(prefix string) []string {
	if err := b.lock(); err != nil {
		return nil
	}
	defer b.mu.Unlock()
	now := time.Now()
	b.lastly.drop(now)
	b.receipts.drop(now)
	var out []string
	add := func(what, key string) {
		if strings.HasPrefix(key, prefix) {
			out = append(out, what+" "+key)
		}
	}
	for key := range b.keys {
		add("state", key)
	}
	for key := range b.lastly.token {
		add("token", key)
	}
	for l := range b.receipts.at {
		add("receipt", l.Key)
	}
	for key := range b.watchers {
		add("watch", key)
	}
	slices.Sort(out)
	return out
}
