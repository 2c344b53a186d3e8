package memlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/distlock-go/distlock/driver"
)

// Watch implements driver.Backend.
func (b *Backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("memlock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	w := &watch{b: b, key: key, owner: owner, c: make(chan struct{}, 1)}
	set := b.watchers[key]
	if set == nil {
		set = make(map[*watch]struct{})
		b.watchers[key] = set
	}
	set[w] = struct{}{}
	return w, nil
}

type watch struct {
	b     *Backend
	key   string
	owner string // a fair waiter's, woken in its turn only; "" for every release
	c     chan struct{}
	once  sync.Once
}

func (w *watch) C() <-chan struct{} { return w.c }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.b.mu.Lock()
		defer w.b.mu.Unlock()
		set := w.b.watchers[w.key]
		delete(set, w)
		if len(set) == 0 {
			delete(w.b.watchers, w.key)
		}
	})
	return nil
}

// notifyLocked wakes the watchers of key: with fair waiters in line, only
// the first of them (and the watchers that are not in line); else
// everyone.
func (b *Backend) notifyLocked(key string, s *state) {
	turn := ""
	if len(s.queue) > 0 {
		turn = s.queue[0].owner
	}
	for w := range b.watchers[key] {
		if turn != "" && w.owner != "" && w.owner != turn {
			continue
		}
		select {
		case w.c <- struct{}{}:
		default: // one pending wake-up is enough
		}
	}
}
