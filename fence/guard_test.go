package fence_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/distlock-go/distlock/fence"
)

func TestGuardAdmit(t *testing.T) {
	type step struct {
		resource string
		token    uint64
		stale    bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first token", []step{{"a", 7, false}}},
		{"zero first", []step{{"a", 0, false}, {"a", 0, false}, {"a", 1, false}}},
		{"higher accepted", []step{{"a", 1, false}, {"a", 2, false}, {"a", 10, false}}},
		{"equal accepted", []step{{"a", 5, false}, {"a", 5, false}, {"a", 5, false}}},
		{"lower rejected", []step{{"a", 5, false}, {"a", 4, true}, {"a", 0, true}}},
		{"rejection does not lower", []step{{"a", 5, false}, {"a", 3, true}, {"a", 4, true}, {"a", 5, false}}},
		{"resources independent", []step{{"a", 9, false}, {"b", 1, false}, {"a", 2, true}, {"b", 2, false}, {"", 3, false}, {"", 2, true}}},
		{"max uint64", []step{{"a", math.MaxUint64, false}, {"a", math.MaxUint64, false}, {"a", math.MaxUint64 - 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g fence.Guard
			want := map[string]uint64{}
			for i, s := range tt.steps {
				err := g.Admit(s.resource, s.token)
				if got := errors.Is(err, fence.ErrStale); got != s.stale || (err != nil && !got) {
					t.Fatalf("step %d: Admit(%q, %d) = %v, want stale %v", i, s.resource, s.token, err, s.stale)
				}
				if s.stale {
					h := want[s.resource]
					if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(s.token)) || !strings.Contains(msg, fmt.Sprint(h)) {
						t.Errorf("step %d: error %q does not name token %d and highest %d", i, msg, s.token, h)
					}
				} else {
					want[s.resource] = s.token
				}
				h, ok := g.Highest(s.resource)
				if wh, wok := want[s.resource]; h != wh || ok != wok {
					t.Fatalf("step %d: Highest(%q) = %d, %v; want %d, %v", i, s.resource, h, ok, wh, wok)
				}
			}
		})
	}
}

func TestGuardHighestUnknown(t *testing.T) {
	var g fence.Guard
	if h, ok := g.Highest("nothing"); h != 0 || ok {
		t.Fatalf("Highest on an empty Guard = %d, %v; want 0, false", h, ok)
	}
	if err := g.Admit("other", 3); err != nil {
		t.Fatal(err)
	}
	if h, ok := g.Highest("nothing"); h != 0 || ok {
		t.Fatalf("Highest of an unseen resource = %d, %v; want 0, false", h, ok)
	}
}

func TestGuardDo(t *testing.T) {
	var g fence.Guard
	calls := 0
	write := func() error { calls++; return nil }
	if err := g.Do("r", 5, write); err != nil || calls != 1 {
		t.Fatalf("Do(5) = %v with %d writes; want nil, 1", err, calls)
	}
	if err := g.Do("r", 4, write); !errors.Is(err, fence.ErrStale) || calls != 1 {
		t.Fatalf("Do(4) = %v with %d writes; want ErrStale, 1 write", err, calls)
	}
	boom := errors.New("boom")
	if err := g.Do("r", 6, func() error { return boom }); err != boom {
		t.Fatalf("Do(6) with a failing write = %v, want %v", err, boom)
	}
	if h, _ := g.Highest("r"); h != 6 {
		t.Fatalf("after a failed write with token 6, Highest = %d, want 6", h)
	}
	if err := g.Do("r", 5, write); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Do(5) after token 6 = %v, want ErrStale", err)
	}
	if err := g.Do("r", 7, nil); err != nil {
		t.Fatalf("Do(7, nil) = %v", err)
	}
}

// TestGuardConcurrent has many goroutines write through Do with shuffled
// tokens on a few resources. Each resource keeps the history of accepted
// writes, unsynchronised but for the Guard: the race detector checks that
// Do serialises them, and the history must never go down.
func TestGuardConcurrent(t *testing.T) {
	const (
		resources  = 4
		goroutines = 64
		perG       = 200
	)
	var g fence.Guard
	history := make([][]uint64, resources)
	var maxToken [resources]uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range perG {
				r := rng.IntN(resources)
				tok := rng.Uint64N(1000)
				mu.Lock()
				maxToken[r] = max(maxToken[r], tok)
				mu.Unlock()
				err := g.Do(fmt.Sprint("res-", r), tok, func() error {
					// Yield inside the write, so that a newer writer
					// would overtake this one if Do let it.
					runtime.Gosched()
					history[r] = append(history[r], tok)
					return nil
				})
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Errorf("Do: %v", err)
				}
				// Admit alone, interleaved with Do, must keep the same order.
				if err := g.Admit(fmt.Sprint("res-", r), tok); err != nil && !errors.Is(err, fence.ErrStale) {
					t.Errorf("Admit: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for r, h := range history {
		for i := 1; i < len(h); i++ {
			if h[i] < h[i-1] {
				t.Fatalf("resource %d: write with token %d accepted after %d", r, h[i], h[i-1])
			}
		}
		got, _ := g.Highest(fmt.Sprint("res-", r))
		if got != maxToken[r] {
			t.Errorf("resource %d: Highest = %d, want the largest token offered, %d", r, got, maxToken[r])
		}
	}
}
