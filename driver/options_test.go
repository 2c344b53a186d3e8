package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock-go/distlock/driver"
)

// TestOptionCheck: the first invalid option is the one reported, as an
// invalid backend, naming the backend, the option and what it wants.
func TestOptionCheck(t *testing.T) {
	var c driver.OptionCheck
	if err := c.Err(); err != nil {
		t.Fatalf("nothing recorded: %v", err)
	}
	c.Invalid("mybackend", "WithDrift(nil)", "want a function")
	c.Invalid("mybackend", "WithMaxTTL(-1s)", "want a positive maximum")
	err := c.Err()
	if !errors.Is(err, driver.ErrInvalidBackend) {
		t.Errorf("%v does not wrap ErrInvalidBackend", err)
	}
	if got, want := err.Error(), "mybackend: WithDrift(nil): want a function"; !strings.HasPrefix(got, want) {
		t.Errorf("%q; want it to begin %q", got, want)
	}
}
