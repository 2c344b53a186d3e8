package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
)

// TestSimultaneousTryLocksOneWinner: clients that call TryLock on a free
// key at the same moment each reach different nodes first, and the vote
// can split so that nobody wins a quorum. TryLock fails only if the lock
// is held elsewhere, so in every round exactly one of them must get it:
// never two (exclusion), never none (the lock was free).
func TestSimultaneousTryLocksOneWinner(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(map[int]string{3: "3 masters", 5: "5 masters"}[n], func(t *testing.T) {
			testOneWinner(t, n)
		})
	}
}

func testOneWinner(t *testing.T, nodes int) {
	addrs := addrsOf(startNodes(t, nodes))
	const clients, rounds = 6, 40
	ms := make([]*distlock.Mutex, clients)
	for i := range ms {
		ms[i] = distlock.New(newBackend(t, addrs), distlock.WithTTL(time.Minute)).Mutex(t.Name())
	}
	ctx := context.Background()
	none := 0
	for round := range rounds {
		start := make(chan struct{})
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won []*distlock.Lock
		)
		for _, m := range ms {
			wg.Go(func() {
				<-start
				l, err := m.TryLock(ctx)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				case !errors.Is(err, distlock.ErrNotObtained):
					t.Errorf("round %d: TryLock: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) > 1 {
			t.Fatalf("round %d: %d clients hold the lock at once", round, len(won))
		}
		if len(won) == 0 {
			none++
			t.Errorf("round %d: nobody got the free lock", round)
			continue
		}
		if err := won[0].Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
	}
	if none > 0 {
		t.Errorf("%d of %d rounds without a winner", none, rounds)
	}
}
