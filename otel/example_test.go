package distlockotel_test

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
	distlockotel "github.com/distlock-go/distlock/otel"
)

// Example records a lock's metrics and spans and prints them with the
// stdout exporters. A program would set the global providers (otel.Set...)
// with its own exporters and call NewObserver without options.
func Example() {
	ctx := context.Background()
	spans, err := stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	if err != nil {
		panic(err)
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(os.Stderr))
	if err != nil {
		panic(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))
	defer mp.Shutdown(ctx) // exports the metrics
	defer tp.Shutdown(ctx)

	obs, err := distlockotel.NewObserver(distlockotel.WithTracerProvider(tp), distlockotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	c := distlock.New(memlock.New(), distlock.WithObserver(obs))
	l, err := c.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", l.Key())
	_ = l.Unlock(ctx)
	// Output: holding nightly-report
}
