package redisnode

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSlots: the CRC16 of Redis Cluster's specification, its hash tags, and
// a tag for every slot that falls in that slot.
func TestSlots(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]string{
		"{user1000}.following": "user1000",
		"foo{}{bar}":           "foo{}{bar}",
		"foo{{bar}}zap":        "{bar",
		"foo{bar}{zap}":        "bar",
		"plain":                "plain",
	} {
		if got, w := slotOf(key), int(crc16(want))%slots; got != w {
			t.Errorf("slotOf(%q) = %d, want %d (the slot of %q)", key, got, w, want)
		}
	}
	for s := range slots {
		if got := slotOf("{" + slotTag(s) + "}"); got != s {
			t.Fatalf("slotTag(%d) = %q, in slot %d", s, slotTag(s), got)
		}
	}
	k := keysFor("app:", "orders:42", Guard{Cluster: true}, noGuard)
	if slotOf(k.Guard) != slotOf(k.Lock) {
		t.Errorf("cluster marker %q not in the slot of %q", k.Guard, k.Lock)
	}
	k = keysFor("app{x}:", "orders:42", Guard{Cluster: true}, noGuard)
	if slotOf(k.Guard) != slotOf(k.Lock) {
		t.Errorf("cluster marker %q not in the slot of %q (a prefix with its own tag)", k.Guard, k.Lock)
	}
}

func TestGuardQuery(t *testing.T) {
	for _, tt := range []struct {
		query   string
		maxTTL  time.Duration
		off     bool
		durable bool
		bad     bool
	}{
		{"", 0, false, false, false},
		{"max_ttl=90s&prefix=p", 90 * time.Second, false, false, false},
		{"restart_guard=off", 0, true, false, false},
		{"restart_guard=on&max_ttl=2m", 2 * time.Minute, false, false, false},
		{"restart_guard=durable&max_ttl=2m", 2 * time.Minute, false, true, false},
		{"max_ttl=0s", 0, false, false, true},
		{"max_ttl=soon", 0, false, false, true},
		{"restart_guard=no", 0, false, false, true},
	} {
		q, _ := url.ParseQuery(tt.query)
		maxTTL, off, durable, err := GuardQuery(q)
		if (err != nil) != tt.bad || maxTTL != tt.maxTTL || off != tt.off || durable != tt.durable {
			t.Errorf("GuardQuery(%q) = %v, %v, %v, %v", tt.query, maxTTL, off, durable, err)
		}
		if err == nil && (q.Has("max_ttl") || q.Has("restart_guard")) {
			t.Errorf("GuardQuery(%q) left its options in the query: %v", tt.query, q)
		}
	}
}

func TestRisks(t *testing.T) {
	for _, tt := range []struct {
		memory, persistence string
		n                   int      // warnings
		want                []string // in them
	}{
		{"maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n", "aof_enabled:1\r\n", 0, nil},
		{"maxmemory:1048576\r\nmaxmemory_policy:noeviction\r\n", "aof_enabled:1\r\n", 0, nil},
		{"maxmemory:1048576\r\nmaxmemory_policy:allkeys-lru\r\n", "aof_enabled:1\r\n", 1, []string{"allkeys-lru", "locks and fencing counters"}},
		{"maxmemory:1048576\r\nmaxmemory_policy:volatile-ttl\r\n", "aof_enabled:1\r\n", 1, []string{"volatile-ttl", "evict held locks and"}},
		{"maxmemory:0\r\n", "aof_enabled:0\r\n", 1, []string{"no append-only file", "restart guard"}},
		{"maxmemory:9\r\nmaxmemory_policy:allkeys-lfu\r\n", "aof_enabled:0\r\n", 2, []string{"allkeys-lfu", "no append-only file"}},
	} {
		got := risks(tt.memory, tt.persistence, time.Minute)
		all := strings.Join(got, "; ")
		if len(got) != tt.n {
			t.Errorf("risks(%q, %q) = %q, want %d warnings", tt.memory, tt.persistence, got, tt.n)
		}
		for _, w := range tt.want {
			if !strings.Contains(all, w) {
				t.Errorf("risks(%q, %q) = %q, want %q in it", tt.memory, tt.persistence, got, w)
			}
		}
	}
}
