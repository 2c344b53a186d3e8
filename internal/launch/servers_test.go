package launch_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// TestZooKeeperEnsembleFaults starts an ensemble, kills its leader (the
// others elect another), restarts it, and pauses a member: the Server
// methods the torture faults use, on ZooKeeper.
func TestZooKeeperEnsembleFaults(t *testing.T) {
	zs, err := launch.StartEnsemble(context.Background(), launch.ZooKeeperConfig{}, 3)
	if errors.Is(err, launch.ErrNoZooKeeper) && os.Getenv("DISTLOCK_REQUIRE_SERVERS") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, z := range zs {
			_ = z.Close()
		}
	})
	leader := func() launch.Server {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			for _, z := range zs {
				if m, _ := z.Mode(); m == "leader" {
					return z
				}
			}
		}
		t.Fatal("no leader within 30s")
		return nil
	}
	old := leader()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := launch.FourLetter(old.Addr(), "srvr"); err == nil {
		t.Fatal("a killed server answered")
	}
	if now := leader(); now == old {
		t.Fatal("the killed server is still the leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := old.(*launch.ZooKeeper).Mode(); err != nil || m != "follower" {
		t.Fatalf("restarted server: mode %q, %v; want follower", m, err)
	}

	z := zs[0]
	if err := z.Pause(); err != nil {
		t.Fatal(err)
	}
	if m, err := z.Mode(); err == nil {
		t.Errorf("a paused server answered: mode %s", m)
	}
	if err := z.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := z.AwaitServing(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

func TestZooKeeperStandalone(t *testing.T) {
	z, err := launch.StartZooKeeper(context.Background(), launch.ZooKeeperConfig{})
	if errors.Is(err, launch.ErrNoZooKeeper) && os.Getenv("DISTLOCK_REQUIRE_SERVERS") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if m, err := z.Mode(); err != nil || m != "standalone" {
		t.Fatalf("mode %q, %v; want standalone", m, err)
	}
}

// TestEtcdClusterRestart starts a 3-member etcd cluster, kills a member
// and restarts it on its data.
func TestEtcdClusterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ms, err := launch.StartEtcd(ctx, 3)
	if errors.Is(err, launch.ErrNoEtcd) && os.Getenv("DISTLOCK_REQUIRE_SERVERS") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			_ = m.Close()
		}
	})
	m := ms[1]
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", m.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("a killed member accepted a connection")
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
}

// TestMariaDBInParallel starts several MariaDB servers at once, as test
// packages running side by side do. Each must keep its temporary files to
// itself: mariadbd clears its tmpdir of #sql files as it starts, and in a
// shared one it pulls the temporary tables from under another server's
// bootstrap, which then fails or crashes.
func TestMariaDBInParallel(t *testing.T) {
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			d, err := launch.StartMariaDB(context.Background())
			if err == nil {
				err = d.Close()
			}
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		if errors.Is(err, launch.ErrNoDatabase) && os.Getenv("DISTLOCK_REQUIRE_SERVERS") != "1" {
			t.Skip(err)
		}
		if err != nil {
			t.Error(err)
		}
	}
}
