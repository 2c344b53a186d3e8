package etcdlock_test

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/etcdlock/internal/etcdtest"
)

// TestForeignKeys: keys under a lock's prefix that this package did not
// write (an operator's, another program's), too short to name a kind of
// holding or naming none, are no holdings: Inspect, List and Break pass
// them over, and Break leaves them.
func TestForeignKeys(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	admin := c.Client(t)
	b := newBackend(t, c)
	ctx := timeout(t, 30*time.Second)
	key := uniqueKey("foreign")
	foreign := []string{lockPrefix(key), lockPrefix(key) + "x", lockPrefix(key) + "zz/x"}
	for _, k := range foreign {
		if _, err := admin.Put(ctx, k, "not a holding"); err != nil {
			t.Fatalf("Put %q: %v", k, err)
		}
	}
	// call runs f, failing the test if it panics.
	call := func(name string, f func() error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s with foreign keys under the lock: panic: %v", name, r)
			}
		}()
		if err := f(); err != nil {
			t.Errorf("%s with foreign keys under the lock: %v", name, err)
		}
	}
	want := func(what string, info driver.Info, held bool) error {
		if info.Held != held || (held && (info.Kind != driver.Read || info.Holds != 1)) {
			return fmt.Errorf("%s: %+v; want held %v (by one reader)", what, info, held)
		}
		return nil
	}
	call("Inspect", func() error {
		info, err := b.Inspect(ctx, key)
		if err != nil {
			return err
		}
		return want("Inspect", info, false)
	})
	call("List", func() error {
		list, err := b.List(ctx, key)
		if err != nil || len(list) != 0 {
			return fmt.Errorf("List: %+v, %v; want no held key", list, err)
		}
		return nil
	})
	call("Break", func() error {
		info, err := b.Break(ctx, key)
		if err != nil {
			return err
		}
		return want("Break", info, false)
	})

	// A reader is let in (the keys are no writers), and is its holder.
	reader := driver.Request{Lease: driver.Lease{Key: key, Owner: uniqueKey("reader"), Kind: driver.Read}, TTL: 10 * time.Second}
	if g, err := b.Acquire(ctx, reader); err != nil || !g.Acquired {
		t.Fatalf("Acquire of a reader: %+v, %v", g, err)
	}
	call("Inspect", func() error {
		info, err := b.Inspect(ctx, key)
		if err != nil {
			return err
		}
		return want("Inspect", info, true)
	})
	call("List", func() error {
		list, err := b.List(ctx, key)
		if err != nil || len(list) != 1 || list[0].Key != key {
			return fmt.Errorf("List: %+v, %v; want %q alone", list, err, key)
		}
		return want("List", list[0].Info, true)
	})
	call("Break", func() error {
		info, err := b.Break(ctx, key)
		if err != nil {
			return err
		}
		return want("Break", info, true)
	})
	resp, err := admin.Get(ctx, lockPrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	var left []string
	for _, kv := range resp.Kvs {
		left = append(left, string(kv.Key))
	}
	if fmt.Sprint(left) != fmt.Sprint(foreign) {
		t.Errorf("keys under the lock after Break: %q; want the foreign keys alone, %q", left, foreign)
	}
}
