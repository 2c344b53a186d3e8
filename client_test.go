package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/memlock"
	"github.com/distlock-go/distlock/redislock"
)

// TestClientDeclareFresh: a brand-new Redis server's restart guard holds
// new keys back until the client declares the server fresh; a backend
// without a guard has nothing to declare.
func TestClientDeclareFresh(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.AsRestarted()) // as an operator starts one: unmarked
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	c := distlock.New(redislock.New(rdb))
	ctx := context.Background()
	if l, err := c.Mutex("fresh").TryLock(ctx); !errors.Is(err, distlock.ErrRestartGuard) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Fatalf("TryLock on a server started a moment ago: %v; want ErrRestartGuard", err)
	}
	if err := c.DeclareFresh(ctx); err != nil {
		t.Fatalf("DeclareFresh: %v", err)
	}
	l, err := c.Mutex("fresh").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after DeclareFresh: %v", err)
	}
	_ = l.Unlock(ctx)

	if err := distlock.New(memlock.New()).DeclareFresh(ctx); err != nil {
		t.Errorf("DeclareFresh on memlock: %v; want nil, nothing to declare", err)
	}
	if err := (*distlock.Client)(nil).DeclareFresh(ctx); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("DeclareFresh on a nil client: %v", err)
	}
}

// redisBackend returns a go-redis client of a new redis-server, set up as
// the package docs say, and a backend on it, both closed when t ends.
func redisBackend(t *testing.T) (*redis.Client, *redislock.Backend) {
	t.Helper()
	srv := testserver.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	b := redislock.New(rdb)
	t.Cleanup(func() { b.Close() })
	return rdb, b
}

// TestCloseReleases: Close of a client made with New releases the locks it
// holds (another client takes them at once, long before their TTL), ends
// a waiting Lock, refuses new locks, and leaves the caller's Redis client
// open.
func TestCloseReleases(t *testing.T) {
	rdb, b := redisBackend(t)
	ctx := context.Background()
	ttl := distlock.WithTTL(30 * time.Second) // far longer than the test: only a release frees the keys
	c := distlock.New(b, ttl)
	other := distlock.New(b, ttl)

	// tries takes one lock of each kind from a client.
	tries := func(c *distlock.Client) map[string]func() (*distlock.Lock, error) {
		return map[string]func() (*distlock.Lock, error){
			"mutex":     func() (*distlock.Lock, error) { return c.Mutex("close:m").TryLock(ctx) },
			"semaphore": func() (*distlock.Lock, error) { return c.Semaphore("close:s", 1).TryAcquire(ctx) },
			"write":     func() (*distlock.Lock, error) { return c.RWMutex("close:rw").TryLock(ctx) },
		}
	}
	var held []*distlock.Lock
	for name, take := range tries(c) {
		l, err := take()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		held = append(held, l)
	}
	waiting := make(chan error, 1)
	blocker, err := other.Mutex("close:busy").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Unlock(ctx)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		l, err := c.Mutex("close:busy").Lock(wctx)
		if l != nil {
			_ = l.Unlock(ctx)
		}
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it wait (if not yet, it finds the client closed)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, l := range held {
		select {
		case <-l.Done():
		default:
			t.Errorf("%q: Done open after Close", l.Key())
		}
		if !errors.Is(l.Err(), distlock.ErrLockReleased) {
			t.Errorf("%q: Err after Close = %v; want ErrLockReleased", l.Key(), l.Err())
		}
	}
	for name, take := range tries(other) {
		l, err := take()
		if err != nil {
			t.Errorf("%s still held after Close: %v", name, err)
			continue
		}
		_ = l.Unlock(ctx)
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, distlock.ErrClientClosed) || !errors.Is(err, distlock.ErrNotObtained) {
			t.Errorf("Lock waiting at Close: %v; want ErrClientClosed and ErrNotObtained", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lock waiting at Close still waits")
	}
	if l, err := c.Mutex("close:new").TryLock(ctx); !errors.Is(err, distlock.ErrClientClosed) {
		if l != nil {
			_ = l.Unlock(ctx)
		}
		t.Errorf("TryLock after Close: %v; want ErrClientClosed", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("the caller's Redis client after Close: %v; want it open", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseOpened: Close of a client made by Open releases its locks
// before it closes the connections it opened.
func TestCloseOpened(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	c, err := distlock.Open(ctx, "redis://"+srv.Addr(), distlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("opened").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	other := distlock.New(redislock.New(rdb))
	l, err := other.Mutex("opened").TryLock(ctx)
	if err != nil {
		t.Fatalf("the lock of a closed client: %v; want it free", err)
	}
	_ = l.Unlock(ctx)
}

func TestTypedNilBackend(t *testing.T) {
	ctx := context.Background()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a typed nil backend panicked: %v", r)
		}
	}()
	c := distlock.New((*memlock.Backend)(nil))
	for name, take := range map[string]func() (*distlock.Lock, error){
		"Mutex.Lock":           func() (*distlock.Lock, error) { return c.Mutex("k").Lock(ctx) },
		"Mutex.TryLock":        func() (*distlock.Lock, error) { return c.Mutex("k").TryLock(ctx) },
		"Semaphore.Acquire":    func() (*distlock.Lock, error) { return c.Semaphore("s", 2).Acquire(ctx) },
		"RWMutex.RLock":        func() (*distlock.Lock, error) { return c.RWMutex("rw").RLock(ctx) },
		"RWMutex.TryLock":      func() (*distlock.Lock, error) { return c.RWMutex("rw").TryLock(ctx) },
		"Semaphore.TryAcquire": func() (*distlock.Lock, error) { return c.Semaphore("s", 2).TryAcquire(ctx) },
	} {
		if _, err := take(); !errors.Is(err, distlock.ErrInvalidBackend) {
			t.Errorf("%s: %v; want ErrInvalidBackend", name, err)
		}
	}
	if _, err := distlock.LockAll(ctx, c.Mutex("a")); !errors.Is(err, distlock.ErrInvalidBackend) {
		t.Errorf("LockAll: %v; want ErrInvalidBackend", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
