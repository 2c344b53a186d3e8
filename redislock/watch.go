package redislock

import (
	"context"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend over the client's shared subscription.
// A fair waiter's watch (owner not empty) fires only for the releases
// that make it its turn.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := b.check(key); err != nil {
		return nil, err
	}
	ch := b.keys.Get(key).Channel
	if owner == "" {
		return b.notify.Watch(ctx, ch)
	}
	return b.notify.WatchFor(ctx, ch, owner)
}

// WatchMark implements driver.MarkWatcher: the mark of the key's channel
// on the client's shared subscription (0 when it is not live).
func (b *Backend) WatchMark(key string) uint64 {
	if b.check(key) != nil {
		return 0
	}
	return b.notify.Mark(b.keys.Get(key).Channel)
}

// WatchSince implements driver.MarkWatcher. A refused attempt makes the
// release of what refused it publish on the key's channel (the same
// promise Watch rests on): if the channel was live before the attempt was
// sent and has carried no message since, the watch misses no such release.
func (b *Backend) WatchSince(ctx context.Context, key, owner string, mark uint64) (driver.Watch, bool, error) {
	if err := b.check(key); err != nil {
		return nil, true, err
	}
	w, missed, err := b.notify.WatchSince(ctx, b.keys.Get(key).Channel, owner, mark)
	if err != nil {
		return nil, true, err // not a typed nil in the interface
	}
	return w, missed, nil
}
