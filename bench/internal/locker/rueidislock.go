package locker

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// Rueidis is rueidislock with KeyMajority 1 (one key on one Redis), its own
// rueidis client with client-side caching on, which is how its waiters learn
// of a release.
func Rueidis(noLoop bool) Library {
	return Library{
		Name: "rueidislock", Module: "github.com/redis/rueidis", Kind: Peer, Nodes: 1, Contended: true,
		Config: "KeyMajority 1, KeyValidity = TTL, extension every TTL/2 (default), NoLoopTracking on Redis ≥ 7.0.5",
		How: "Built on rueidis (RESP3, auto-pipelining). Acquire runs a script that does SET NX PXAT and then GET on the key: " +
			"the GET makes the server track the key for this client (client-side caching), so a later change to it is pushed " +
			"as an invalidation. Release is a script that compares and deletes, and the release function waits until it is done. " +
			"A waiter does not poll: it blocks until the invalidation of the key arrives, then tries again, so it is woken about " +
			"one round trip after the release. Every held lock has a goroutine that extends it and watches for invalidations.",
		New: func(_ context.Context, addrs []string, ttl time.Duration) (Locker, error) {
			lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption:   rueidis.ClientOption{InitAddress: addrs},
				KeyMajority:    1,
				KeyValidity:    ttl,
				NoLoopTracking: noLoop,
			})
			if err != nil {
				return nil, err
			}
			return &rueidisLocker{lk: lk}, nil
		},
	}
}

type rueidisLocker struct{ lk rueidislock.Locker }

// rueidisHeld is the cancel function rueidislock returns: calling it
// deletes the key and waits for that to finish.
type rueidisHeld context.CancelFunc

func (h rueidisHeld) Release(context.Context) error {
	h()
	return nil
}

func (l *rueidisLocker) TryAcquire(ctx context.Context, key string) (Held, error) {
	_, cancel, err := l.lk.TryWithContext(ctx, key)
	if errors.Is(err, rueidislock.ErrNotLocked) {
		return nil, ErrNotObtained
	}
	if err != nil {
		return nil, err
	}
	return rueidisHeld(cancel), nil
}

func (l *rueidisLocker) Acquire(ctx context.Context, key string) (Held, error) {
	_, cancel, err := l.lk.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return rueidisHeld(cancel), nil
}

func (l *rueidisLocker) Close() error {
	l.lk.Close()
	return nil
}
