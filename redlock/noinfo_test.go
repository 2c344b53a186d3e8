package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redistest"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/redlock"
)

// TestGuardWithoutInfo: on nodes whose ACL forbids the user INFO, which
// the restart guard reads, no attempt is granted, the second no more than
// the first, and the error names INFO.
func TestGuardWithoutInfo(t *testing.T) {
	srvs := startNodes(t, 3, testserver.AsRestarted())
	cs := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		if _, err := s.Do(t, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"); err != nil {
			t.Fatal(err)
		}
		cs[i] = redistest.Client(t, s.Addr(), func(o *redis.Options) { o.Username, o.Password = "noinfo", "pw" })
	}
	b := redlock.New(cs)
	t.Cleanup(func() { b.Close() })
	c := distlock.New(b, distlock.WithTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		l, err := c.Mutex("k").TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			t.Fatalf("attempt %d: granted on nodes the guard cannot read; want an error", i+1)
		}
		if !strings.Contains(err.Error(), "INFO") {
			t.Errorf("attempt %d: %v; want the error to name INFO", i+1, err)
		}
	}
}
