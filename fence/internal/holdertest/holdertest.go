// Package holdertest holds the cases of writes that name their holder,
// which every helper of package fence and its subpackages must decide
// alike.
package holdertest

import (
	"errors"
	"testing"

	"github.com/distlock-go/distlock/fence"
)

// Step is one write of a case: its token, its holder ("": none) and the
// expected outcome.
type Step struct {
	Token  uint64
	Holder string
	Want   error // nil, fence.ErrStale or fence.ErrTokenReused
}

// Cases are the cases by name. Equal tokens from different holders are
// what a store that lost its data produces.
var Cases = map[string][]Step{
	"same holder again":         {{5, "a", nil}, {5, "a", nil}, {6, "b", nil}},
	"second holder, same token": {{5, "a", nil}, {5, "b", fence.ErrTokenReused}, {5, "a", nil}},
	"lower token":               {{5, "a", nil}, {4, "b", fence.ErrStale}, {4, "a", fence.ErrStale}},
	"higher token, new holder":  {{5, "a", nil}, {6, "b", nil}, {6, "a", fence.ErrTokenReused}},
	"no holder matches any":     {{5, "", nil}, {5, "a", nil}, {5, "", nil}, {5, "b", fence.ErrTokenReused}},
	"holderless then named":     {{5, "a", nil}, {5, "", nil}, {5, "b", fence.ErrTokenReused}},
}

// Check fails t if err, the outcome of step i, is not what s expects.
func Check(t testing.TB, i int, s Step, err error) {
	t.Helper()
	switch {
	case s.Want == nil && err != nil:
		t.Fatalf("step %d (token %d, holder %q): %v; want accepted", i, s.Token, s.Holder, err)
	case s.Want != nil && !errors.Is(err, s.Want):
		t.Fatalf("step %d (token %d, holder %q): %v; want %v", i, s.Token, s.Holder, err, s.Want)
	case s.Want != nil && !errors.Is(err, fence.ErrStale):
		t.Fatalf("step %d: %v does not wrap ErrStale: callers that check only that would let it through", i, err)
	}
}
