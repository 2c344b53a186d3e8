package etcdlock

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/distlock-go/distlock/driver"
)

// TestHoldingValueOwner: the value of an owner's key names the owner,
// whatever characters it has, as JSON reads it back.
func TestHoldingValueOwner(t *testing.T) {
	for _, owner := range []string{"owner-3f9a", "a\"b", "back\\slash", "ü", "<&>", "\x00\n", "\x7f", "\xff"} {
		val, err := holdingValue(driver.Request{Lease: driver.Lease{Key: "k", Owner: owner}})
		if err != nil {
			t.Fatalf("holdingValue(%q): %v", owner, err)
		}
		var h holding
		if err := json.Unmarshal([]byte(val), &h); err != nil {
			t.Fatalf("holdingValue(%q) = %s: %v", owner, val, err)
		}
		if back, err := url.PathUnescape(h.Owner); err != nil || back != owner {
			t.Errorf("holdingValue(%q) = %s: owner %q, read back as %q, %v", owner, val, h.Owner, back, err)
		}
	}
}
