package redisnode

import (
	"sync"
	"testing"
)

// TestCallIDsUnique: ids handed out concurrently never repeat.
func TestCallIDsUnique(t *testing.T) {
	const workers, each = 8, 1000
	got := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got[w] = append(got[w], *callID().(*uint64))
			}
		}()
	}
	wg.Wait()
	seen := make(map[uint64]bool, workers*each)
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("call id %d handed out twice", id)
			}
			seen[id] = true
		}
	}
}
