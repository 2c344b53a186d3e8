package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

var all = driver.Capabilities{Notify: true, Fair: true, ReadWrite: true, Semaphore: true, Reentrant: true}

func mutexRequest() driver.Request {
	return driver.Request{Lease: driver.Lease{Key: "k", Owner: "o"}, TTL: time.Second}
}

// TestRequestValidate: every request the contract rules out is refused
// with the error that says so and names what is wrong; every request it
// allows passes.
func TestRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps driver.Capabilities
		edit func(*driver.Request)
		want error  // nil: valid
		says string // in the error
	}{
		{"mutex", driver.Capabilities{}, func(*driver.Request) {}, nil, ""},
		{"longest key and owner", driver.Capabilities{}, func(r *driver.Request) {
			r.Key, r.Owner = strings.Repeat("k", driver.MaxKeyLen), strings.Repeat("o", driver.MaxOwnerLen)
		}, nil, ""},
		{"fair re-entrant mutex", all, func(r *driver.Request) { r.Fair, r.Reentry = true, "id" }, nil, ""},
		{"read lock", all, func(r *driver.Request) { r.Kind = driver.Read }, nil, ""},
		{"write lock", all, func(r *driver.Request) { r.Kind = driver.Write }, nil, ""},
		{"permit", all, func(r *driver.Request) { r.Kind, r.Limit = driver.Permit, 1 }, nil, ""},

		{"empty key", all, func(r *driver.Request) { r.Key = "" }, driver.ErrInvalidKey, "empty key"},
		{"long key", all, func(r *driver.Request) { r.Key = strings.Repeat("k", driver.MaxKeyLen+1) }, driver.ErrInvalidKey, "1025 bytes"},
		{"empty owner", all, func(r *driver.Request) { r.Owner = "" }, driver.ErrInvalidRequest, "empty owner"},
		{"long owner", all, func(r *driver.Request) { r.Owner = strings.Repeat("o", driver.MaxOwnerLen+1) }, driver.ErrInvalidRequest, "256 bytes"},
		{"unknown kind", all, func(r *driver.Request) { r.Kind = driver.Permit + 1 }, driver.ErrInvalidRequest, "kind 4"},
		{"zero TTL", all, func(r *driver.Request) { r.TTL = 0 }, driver.ErrInvalidRequest, "TTL 0s"},
		{"negative TTL", all, func(r *driver.Request) { r.TTL = -time.Second }, driver.ErrInvalidRequest, "TTL -1s"},
		{"no permits", all, func(r *driver.Request) { r.Kind = driver.Permit }, driver.ErrInvalidRequest, "0 permits"},
		{"negative permits", all, func(r *driver.Request) { r.Kind, r.Limit = driver.Permit, -2 }, driver.ErrInvalidRequest, "-2 permits"},

		{"fair read lock", all, func(r *driver.Request) { r.Kind, r.Fair = driver.Read, true }, errors.ErrUnsupported, "fair read lock"},
		{"re-entrant permit", all, func(r *driver.Request) { r.Kind, r.Limit, r.Reentry = driver.Permit, 2, "id" }, errors.ErrUnsupported, "re-entrant semaphore permit"},
		{"read lock not offered", driver.Capabilities{}, func(r *driver.Request) { r.Kind = driver.Read }, errors.ErrUnsupported, "read lock"},
		{"write lock not offered", driver.Capabilities{}, func(r *driver.Request) { r.Kind = driver.Write }, errors.ErrUnsupported, "write lock"},
		{"permit not offered", driver.Capabilities{}, func(r *driver.Request) { r.Kind, r.Limit = driver.Permit, 2 }, errors.ErrUnsupported, "semaphore permit"},
		{"fairness not offered", driver.Capabilities{}, func(r *driver.Request) { r.Fair = true }, errors.ErrUnsupported, "fair mutex"},
		{"re-entrance not offered", driver.Capabilities{}, func(r *driver.Request) { r.Reentry = "id" }, errors.ErrUnsupported, "re-entrant mutex"},
	} {
		req := mutexRequest()
		tc.edit(&req)
		err := req.Validate(tc.caps)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v; want it valid", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v; want an error wrapping %v", tc.name, err, tc.want)
		case tc.want != nil && !strings.Contains(err.Error(), tc.says):
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.says)
		}
	}
}

// TestLeaseValidateRefresh: a lease to release or refresh is checked as an
// acquired one is, and a refresh wants a positive TTL.
func TestLeaseValidateRefresh(t *testing.T) {
	l := driver.Lease{Key: "k", Owner: "o"}
	if err := l.ValidateRefresh(time.Second); err != nil {
		t.Errorf("a valid refresh: %v", err)
	}
	if err := l.ValidateRefresh(0); !errors.Is(err, driver.ErrInvalidRequest) {
		t.Errorf("a refresh to 0s: %v; want ErrInvalidRequest", err)
	}
	if err := (driver.Lease{Owner: "o"}).ValidateRefresh(time.Second); !errors.Is(err, driver.ErrInvalidKey) {
		t.Errorf("a refresh of an empty key: %v; want ErrInvalidKey", err)
	}
	if err := (driver.Lease{Key: "k"}).Validate(); !errors.Is(err, driver.ErrInvalidRequest) {
		t.Errorf("a lease without owner: %v; want ErrInvalidRequest", err)
	}
}

func TestLeaseID(t *testing.T) {
	l := driver.Lease{Key: "k", Owner: "o", Kind: driver.Write}
	if got, want := l.ID(), (driver.LeaseID{Key: "k", Owner: "o"}); got != want {
		t.Errorf("ID() = %+v; want %+v", got, want)
	}
}

// TestValidateKey: the check of a key given alone (Watch, Inspect, Break)
// allows 1 to MaxKeyLen bytes of anything, and refuses the rest with
// ErrInvalidKey, as Lease.Validate does.
func TestValidateKey(t *testing.T) {
	for _, key := range []string{"k", "\x00", strings.Repeat("k", driver.MaxKeyLen)} {
		if err := driver.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%.20q): %v; want it valid", key, err)
		}
	}
	for key, says := range map[string]string{"": "empty key", strings.Repeat("k", driver.MaxKeyLen+1): "1025 bytes"} {
		err := driver.ValidateKey(key)
		if !errors.Is(err, driver.ErrInvalidKey) || !strings.Contains(err.Error(), says) {
			t.Errorf("ValidateKey of %d bytes: %v; want an error wrapping ErrInvalidKey that says %q", len(key), err, says)
		}
		if lerr := (driver.Lease{Key: key, Owner: "o"}).Validate(); lerr == nil || lerr.Error() != err.Error() {
			t.Errorf("Lease.Validate of a key of %d bytes: %v; want ValidateKey's %v", len(key), lerr, err)
		}
	}
}
