package sqllock

import (
	"strings"
	"testing"
)

// TestChannel: every valid table name gets a channel PostgreSQL takes (a
// plain identifier of at most 63 bytes); names PostgreSQL folds to one
// table share it; long names that differ only at the end do not.
func TestChannel(t *testing.T) {
	long := strings.Repeat("s", 57) + "." + strings.Repeat("l", 57)
	names := []string{DefaultTable, "KNOWN_LOCKS", "app.locks", strings.Repeat("l", 53), strings.Repeat("l", 57), long, long[:len(long)-1] + "m"}
	seen := map[string]string{}
	for _, name := range names {
		if err := checkTable(name); err != nil {
			t.Fatalf("test table name %q: %v", name, err)
		}
		c := channel(name)
		if len(c) > maxChannel || !strings.HasPrefix(c, "distlock_") || strings.ContainsAny(c, ".'\"") {
			t.Errorf("channel(%q) = %q: not a plain identifier of at most %d bytes", name, c, maxChannel)
		}
		if other, ok := seen[c]; ok {
			t.Errorf("tables %q and %q share channel %q", other, name, c)
		}
		seen[c] = name
	}
	if channel("Known_Locks") != channel("known_locks") {
		t.Errorf("channel(%q) = %q, channel(%q) = %q: one PostgreSQL table, two channels", "Known_Locks", channel("Known_Locks"), "known_locks", channel("known_locks"))
	}
	if got := channel(DefaultTable); got != "distlock_distlock_leases" {
		t.Errorf("channel(DefaultTable) = %q; want distlock_distlock_leases, as before", got)
	}
}
