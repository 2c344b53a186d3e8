package etcdlock

import (
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/distlock-go/distlock/driver"
)

// TestHolders: holders picks the holdings out of a lock's keys in line
// order, passing over the keys this package does not write, even those
// too short to name a kind (whose bytes end where the key does).
func TestHolders(t *testing.T) {
	k := (&Backend{prefix: DefaultPrefix}).keys("k", "", driver.Exclusive, 0)
	kv := func(name string) *mvccpb.KeyValue {
		key := []byte(k.lock + name)
		return &mvccpb.KeyValue{Key: key[:len(key):len(key)]}
	}
	for _, tc := range []struct {
		name       string
		keys, want []string
	}{
		{"mutex", []string{"m/a", "m/b"}, []string{"m/a"}},
		{"writer", []string{"w/a", "w/b"}, []string{"w/a"}},
		{"readers", []string{"r/a", "r/b", "w/c", "r/d"}, []string{"r/a", "r/b"}},
		{"permits", []string{"p/3/a", "p/3/b"}, []string{"p/3/a", "p/3/b"}},
		{"foreign first", []string{"", "x", "zz/x", "w/", "w/a", "w/b"}, []string{"w/a"}},
		{"foreign among readers", []string{"r/a", "x", "", "r/b", "w/c"}, []string{"r/a", "r/b"}},
		{"foreign alone", []string{"", "x", "p/"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kvs []*mvccpb.KeyValue
			for _, name := range tc.keys {
				kvs = append(kvs, kv(name))
			}
			var got []string
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("holders of %q: panic: %v", tc.keys, r)
					}
				}()
				for _, h := range holders(k, kvs) {
					got = append(got, string(h.Key[len(k.lock):]))
				}
			}()
			if !slices.Equal(got, tc.want) {
				t.Errorf("holders of %q: %q; want %q", tc.keys, got, tc.want)
			}
		})
	}
}
