package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// TestSessionTimeoutCapped: a server that grants shorter sessions than
// the client asks for (maxSessionTimeout) shortens every lease's
// deadline, so that Done never closes after the session may have expired.
func TestSessionTimeoutCapped(t *testing.T) {
	t.Parallel()
	const granted = 2 * time.Second // the server's maxSessionTimeout
	srv := testserver.StartZooKeeperMaxSession(t, granted)
	req := func(key string) driver.Request {
		return driver.Request{Lease: driver.Lease{Key: key, Owner: "owner-" + key}, TTL: time.Hour}
	}
	t.Run("URL", func(t *testing.T) {
		c, err := distlock.Open(ctxFor(t, 20*time.Second), "zk://"+srv.Addr()+"?session_timeout=20s")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer c.Close()
		g, err := c.Backend().Acquire(ctxFor(t, 10*time.Second), req("capped-url"))
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if g.ValidFor > granted {
			t.Errorf("ValidFor %v on a session the server granted for %v (20s asked); want at most %[2]v", g.ValidFor, granted)
		}
	})
	t.Run("URLPartition", func(t *testing.T) {
		p := testserver.StartProxy(t, srv.Addr())
		holder, err := distlock.Open(ctxFor(t, 20*time.Second), "zk://"+p.Addr()+"?session_timeout=20s", distlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer holder.Close()
		testSafeLoss(t, []string{srv.Addr()}, holder, granted, p.Blackhole, p.Restore)
	})
	t.Run("New", func(t *testing.T) {
		// Unseen by New: the ensemble's default maximum, 40s, caps a
		// longer session timeout.
		b := zklock.New(dial(t, []string{srv.Addr()}, time.Minute), time.Minute)
		defer b.Close()
		g, err := b.Acquire(ctxFor(t, 10*time.Second), req("capped-new"))
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if g.ValidFor > 40*time.Second {
			t.Errorf("ValidFor %v with a session timeout of a minute given to New; want at most 40s, ZooKeeper's default maxSessionTimeout", g.ValidFor)
		}
		// Stated, the ensemble's maximum caps it.
		stated := zklock.New(dial(t, []string{srv.Addr()}, time.Minute), time.Minute, zklock.WithMaxSessionTimeout(granted))
		defer stated.Close()
		g, err = stated.Acquire(ctxFor(t, 10*time.Second), req("capped-stated"))
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		if g.ValidFor > granted {
			t.Errorf("ValidFor %v with WithMaxSessionTimeout(%v); want at most that", g.ValidFor, granted)
		}
	})
}
