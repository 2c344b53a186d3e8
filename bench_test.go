package distlock_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

// BenchmarkLockUnlock is one uncontended acquire and release on memlock:
// the cost of the root package itself, without an observer (which must
// cost no allocation), with one that does nothing, and with a logger that
// drops everything below Warn.
func BenchmarkLockUnlock(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []distlock.Option
	}{
		{"unobserved", nil},
		{"observer", []distlock.Option{distlock.WithObserver(distlock.ObserverFunc(func(context.Context, distlock.Event) {}))}},
		{"logger", []distlock.Option{distlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			m := distlock.New(memlock.New(), bc.opts...).Mutex("bench")
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
