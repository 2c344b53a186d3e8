package memlock_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock/distlocktest"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
)

func TestConformance(t *testing.T) {
	b := memlock.New()
	distlocktest.Run(t, distlocktest.Harness{
		NewBackend: func(distlocktest.TB) driver.Backend { return b },
		Expire:     func(_ distlocktest.TB, key string) { b.Expire(key) },
		TTL:        100 * time.Millisecond,
	})
}
