package driver_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// TestTTLTooLongError: the refusal of a long TTL is recognised by its
// type, by its sentinel, and by errors.ErrUnsupported, which a caller that
// predates the type looks for; it names the TTL, the maximum and why.
func TestTTLTooLongError(t *testing.T) {
	err := fmt.Errorf("backend: %w", &driver.TTLTooLongError{TTL: time.Hour, Max: time.Minute, Why: "raise it with WithMaxTTL"})
	var tl *driver.TTLTooLongError
	if !errors.As(err, &tl) || tl.Max != time.Minute {
		t.Errorf("errors.As: %v (%+v); want the maximum of 1m0s", err, tl)
	}
	for _, target := range []error{driver.ErrTTLTooLong, errors.ErrUnsupported} {
		if !errors.Is(err, target) {
			t.Errorf("%v does not wrap %v", err, target)
		}
	}
	for _, want := range []string{"1h0m0s", "1m0s", "WithMaxTTL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
