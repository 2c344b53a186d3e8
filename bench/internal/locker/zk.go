package locker

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/zklock"
)

// zkSession is the session timeout every ZooKeeper contender asks for.
const zkSession = 10 * time.Second

// ZooKeeper returns the contenders of the ZooKeeper scenario, each given
// the ensemble's client addresses: the floor, go-zookeeper's own lock
// recipe, and zklock plain and fair.
func ZooKeeper() []Library {
	return []Library{zkFloor(), zkRecipe(), zkOurs(false), zkOurs(true)}
}

// zkQuiet drops go-zookeeper's log lines, which would interleave with the
// benchmark's own.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func dialZK(addrs []string) (*zk.Conn, error) {
	conn, _, err := zk.Connect(addrs, zkSession, zk.WithLogger(zkQuiet{}))
	return conn, err
}

// zkFloor is the least a ZooKeeper lock does: create an ephemeral node
// (refused if it exists) and delete it.
func zkFloor() Library {
	return Library{
		Name: "floor: create + delete", Kind: Floor, Nodes: 3, Role: RoleLock,
		Config: "Create(/bench-floor/KEY, ephemeral), then Delete: two round trips, each a write through the leader",
		How: "Not a safe lock to wait on: no order among waiters and no token. It is the bare cost of a lock as a node, the " +
			"yardstick of the ZooKeeper ×floor ratios. Every create and delete is a write that the leader proposes and a " +
			"quorum logs before the reply.",
		New: func(_ context.Context, addrs []string, _ time.Duration) (Locker, error) {
			conn, err := dialZK(addrs)
			if err != nil {
				return nil, err
			}
			if _, err := conn.Create("/bench-floor", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				conn.Close()
				return nil, err
			}
			return &zkFloorLocker{conn: conn}, nil
		},
	}
}

type zkFloorLocker struct{ conn *zk.Conn }

type zkFloorHeld struct {
	conn *zk.Conn
	path string
}

func (h zkFloorHeld) Release(context.Context) error { return h.conn.Delete(h.path, -1) }

func (f *zkFloorLocker) TryAcquire(_ context.Context, key string) (Held, error) {
	path := "/bench-floor/" + key
	_, err := f.conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		return nil, ErrNotObtained
	}
	if err != nil {
		return nil, err
	}
	return zkFloorHeld{f.conn, path}, nil
}

func (f *zkFloorLocker) Acquire(context.Context, string) (Held, error) { return nil, errCannotWait }

func (f *zkFloorLocker) Close() error { f.conn.Close(); return nil }

// zkRecipe is go-zookeeper's lock recipe (zk.NewLock), the lock most Go
// code on ZooKeeper uses.
func zkRecipe() Library {
	return Library{
		Name: "go-zookeeper zk.Lock", Module: "github.com/go-zookeeper/zk", Kind: Peer, Nodes: 3, Contended: true,
		Config: "zk.NewLock(conn, /bench-recipe/KEY, WorldACL) per acquisition; Lock() blocks (no try, no context)",
		How: "The classic recipe: a protected ephemeral sequential child (creating the parents on first use), then the " +
			"children are listed, and a waiter watches the node just before its own with an exists watch. Unlock deletes " +
			"the node. No fencing token, no lease beyond the session, and Lock takes no context: an uncontended acquire " +
			"is a create and a list, a release a delete.",
		New: func(_ context.Context, addrs []string, _ time.Duration) (Locker, error) {
			conn, err := dialZK(addrs)
			if err != nil {
				return nil, err
			}
			return &zkRecipeLocker{conn: conn}, nil
		},
	}
}

type zkRecipeLocker struct{ conn *zk.Conn }

type zkRecipeHeld struct{ l *zk.Lock }

func (h zkRecipeHeld) Release(context.Context) error { return h.l.Unlock() }

// TryAcquire is Lock: the recipe has no single attempt, and in the
// uncontended scenario the key is always free.
func (r *zkRecipeLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	return r.Acquire(ctx, key)
}

// Acquire waits in Lock, which takes no context: when ctx ends first, the
// lock is released as soon as the abandoned Lock returns.
func (r *zkRecipeLocker) Acquire(ctx context.Context, key string) (Held, error) {
	l := zk.NewLock(r.conn, "/bench-recipe/"+key, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return zkRecipeHeld{l}, nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = l.Unlock()
			}
		}()
		return nil, ctx.Err()
	}
}

func (r *zkRecipeLocker) Close() error { r.conn.Close(); return nil }

// zkOurs is distlock over zklock, plain or fair.
func zkOurs(fair bool) Library {
	name, config := "distlock (zklock)", "distlock.New(zklock.New(conn, 10s), WithTTL(TTL))"
	how := "Acquire creates an ephemeral sequential node named by the owner in the key's line, in a transaction whose " +
		"stat says whether the node is alone there (then it holds: one round trip); else it lists the line. The lowest " +
		"node holds, and its creation zxid is the fencing token. A plain waiter keeps its node from its second attempt " +
		"and watches the node just before its own; told that node left, it holds without a round trip. Release deletes " +
		"the node and records the last token in one transaction. Renewal touches the node's data within the session."
	if fair {
		name, config = "distlock (zklock, fair)", config+", WithFairness()"
		how = "As distlock (zklock), but a waiter keeps its node from its first attempt: FIFO, no herd."
	}
	return Library{
		Name: name, Module: "github.com/distlock-go/distlock", Kind: Ours, Nodes: 3, Contended: true,
		Config: config, How: how,
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			conn, err := dialZK(addrs)
			if err != nil {
				return nil, err
			}
			be := zklock.New(conn, zkSession)
			opts := []distlock.Option{distlock.WithTTL(ttl)}
			if fair {
				opts = append(opts, distlock.WithFairness())
			}
			return &distlockLocker{
				c:     distlock.New(be, opts...),
				close: func() error { err := be.Close(); conn.Close(); return err },
			}, nil
		},
	}
}
