package redisnode

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
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

// TestCheckTTL: a TTL above the maximum is a driver.TTLTooLongError (so
// package distlock reports ErrInvalidTTL at once, whatever the TTL), and a
// maximum that is not positive is an invalid backend.
func TestCheckTTL(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ttl, max time.Duration
		want     error // nil: no error
	}{
		{"at the maximum", time.Minute, time.Minute, nil},
		{"below the maximum", time.Second, time.Minute, nil},
		{"above a short maximum", 20 * time.Second, 10 * time.Second, driver.ErrTTLTooLong},
		{"above the default maximum", 2 * time.Minute, DefaultMaxTTL, driver.ErrTTLTooLong},
		{"zero maximum", time.Second, 0, driver.ErrInvalidBackend},
		{"negative maximum", time.Second, -time.Second, driver.ErrInvalidBackend},
	} {
		err := CheckTTL("pkg", tt.ttl, tt.max)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: CheckTTL(%v, %v) = %v; want nil", tt.name, tt.ttl, tt.max, err)
		case tt.want == nil:
		case err == nil || !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "pkg: "):
			t.Errorf("%s: CheckTTL(%v, %v) = %v; want a pkg error wrapping %v", tt.name, tt.ttl, tt.max, err, tt.want)
		case tt.want == driver.ErrTTLTooLong:
			var e *driver.TTLTooLongError
			if !errors.As(err, &e) || e.TTL != tt.ttl || e.Max != tt.max || !strings.Contains(err.Error(), "WithMaxTTL") {
				t.Errorf("%s: CheckTTL(%v, %v) = %v; want a TTLTooLongError of TTL %v, maximum %v, naming WithMaxTTL", tt.name, tt.ttl, tt.max, err, tt.ttl, tt.max)
			}
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s: %v does not wrap errors.ErrUnsupported", tt.name, err)
			}
		}
	}
}
