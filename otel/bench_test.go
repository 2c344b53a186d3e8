package distlockotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
	distlockotel "github.com/distlock-go/distlock/otel"
)

// BenchmarkLockUnlock is one uncontended acquire and release on memlock
// with the OTel observer on SDK providers (all spans sampled, metrics
// aggregated, nothing exported), beside the same without an observer.
func BenchmarkLockUnlock(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	defer mp.Shutdown(context.Background())
	defer tp.Shutdown(context.Background())
	obs, err := distlockotel.NewObserver(distlockotel.WithMeterProvider(mp), distlockotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []distlock.Option
	}{
		{"unobserved", nil},
		{"otel", []distlock.Option{distlock.WithObserver(obs)}},
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
