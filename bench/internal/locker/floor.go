package locker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Floors are not locks: they issue the bare commands a lock needs, on the
// same go-redis client the peers use, so that what a library adds on top of
// the network and the server shows as the distance to them.

var errCannotWait = errors.New("locker: a floor cannot wait for a key")

// PingFloor is one PING per acquire (one round trip) and nothing on release;
// with several nodes, one PING to each, in parallel.
func PingFloor(nodes int) Library {
	name := "floor: PING"
	cfg := "one PING: a single round trip, the network and server floor"
	if nodes > 1 {
		name = fmt.Sprintf("floor: %d× PING ∥", nodes)
		cfg = fmt.Sprintf("PING to each of %d nodes in parallel: one round trip", nodes)
	}
	return Library{
		Name: name, Kind: Floor, Nodes: nodes, Config: cfg, Role: RoleRTT,
		How: "Not a lock. One PING per node measures a round trip through go-redis, the kernel's loopback and the server: " +
			"every figure below contains at least one of these per round trip.",
		New: func(_ context.Context, addrs []string, _ time.Duration) (Locker, error) {
			return &floor{clients: newGoRedisAll(addrs), ping: true}, nil
		},
	}
}

// SetDelFloor is SET key value NX PX ttl on acquire and DEL key on release
// (two round trips), the least a lease-based lock can do; with several
// nodes, each step goes to every node in parallel.
func SetDelFloor(nodes int) Library {
	name := "floor: SET NX PX + DEL"
	cfg := "SET NX PX, then DEL: two round trips, no token, no ownership check"
	if nodes > 1 {
		name = fmt.Sprintf("floor: %d× SET NX PX ∥ + %d× DEL ∥", nodes, nodes)
		cfg = fmt.Sprintf("SET NX PX to %d nodes in parallel, then DEL to %d in parallel", nodes, nodes)
	}
	return Library{
		Name: name, Kind: Floor, Nodes: nodes, Config: cfg, Role: RoleLock,
		How: "Not a safe lock: no owner token, so DEL may delete someone else's lease, and no fencing token. " +
			"It is the least any lease lock must do, two round trips of two plain commands, and so the yardstick of the ×floor ratios.",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			return &floor{clients: newGoRedisAll(addrs), ttlMS: strconv.FormatInt(ttl.Milliseconds(), 10)}, nil
		},
	}
}

type floor struct {
	clients []*redis.Client
	ping    bool
	ttlMS   string

	// Command arguments are built once per key, so that the floor costs
	// no more allocations than go-redis itself needs.
	key     string
	setArgs []any
	delArgs []any
	pingArg []any
	errs    []error
}

func (f *floor) TryAcquire(ctx context.Context, key string) (Held, error) {
	if f.ping {
		if f.pingArg == nil {
			f.pingArg = []any{"ping"}
		}
		return f, f.each(ctx, f.pingArg, false)
	}
	if key != f.key {
		f.key = key
		f.setArgs = []any{"set", key, "floor", "nx", "px", f.ttlMS}
		f.delArgs = []any{"del", key}
	}
	return f, f.each(ctx, f.setArgs, true)
}

func (f *floor) Release(ctx context.Context) error {
	if f.ping {
		return nil
	}
	return f.each(ctx, f.delArgs, false)
}

// each sends args to every node, in parallel when there are several, and
// fails unless every node succeeded (a floor runs uncontended).
func (f *floor) each(ctx context.Context, args []any, set bool) error {
	do := func(c *redis.Client) error {
		err := c.Do(ctx, args...).Err()
		if set && errors.Is(err, redis.Nil) {
			return ErrNotObtained
		}
		return err
	}
	if len(f.clients) == 1 {
		return do(f.clients[0])
	}
	if f.errs == nil {
		f.errs = make([]error, len(f.clients))
	}
	var wg sync.WaitGroup
	for i, c := range f.clients {
		wg.Go(func() { f.errs[i] = do(c) })
	}
	wg.Wait()
	return errors.Join(f.errs...)
}

func (f *floor) Acquire(context.Context, string) (Held, error) { return nil, errCannotWait }

func (f *floor) Close() error { return closeAll(f.clients) }
