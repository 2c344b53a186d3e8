// Package distlockotel records what distlock's locks do as OpenTelemetry
// metrics and traces. It is a module of its own, so that OpenTelemetry's
// dependencies stay out of the builds of distlock users who do not want it.
//
//	obs := distlockotel.NewObserver() // the global providers, or WithMeterProvider...
//	c := distlock.New(backend, distlock.WithObserver(obs))
//
// # Metrics
//
// Durations are histograms in seconds. Every metric carries distlock.backend
// (the backend's package, such as "redislock") and distlock.kind ("mutex",
// "write", "read" or "permit"); with [WithKeyAttribute] also distlock.key
// (beware: one series per key).
//
//	distlock.acquire.duration   histogram, s      a Lock or TryLock call, from its start to the lock or to giving up
//	                                              (the wait); distlock.acquire.result = "acquired" | "failed"
//	distlock.attempt.duration   histogram, s      one acquisition attempt's round trip;
//	                                              distlock.attempt.outcome = "granted" | "held" | "error"
//	distlock.renewal.duration   histogram, s      one renewal's round trip; distlock.renewal.result = "renewed" | "failed"
//	distlock.hold.duration      histogram, s      from acquisition to release or loss;
//	                                              distlock.hold.end = "released" | "lost"
//	distlock.lease.lost         counter, {lease}  leases lost; distlock.loss.cause = "refused" | "expired" | "reported"
//	distlock.hold.active        updowncounter, {hold}  locks held now
//
// # Traces
//
// A span "distlock.acquire" covers each Lock or TryLock call, its wait
// included, with one span event "attempt" per attempt; its status is Error
// when the call fails. A span "distlock.hold" covers each holding, from the
// grant to the release or loss, with the span events "renewed", "renewal
// failed" and "lost"; a loss sets its status to Error. Both are children of
// the span in the context given to Lock or TryLock, and carry distlock.key,
// distlock.backend, distlock.kind and, once granted, distlock.token.
//
// No attribute or event carries a secret: owner tokens, OwnerIDs and URLs
// never reach the observer.
package distlockotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/distlock-go/distlock"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/distlock-go/distlock/otel"

// Attribute keys.
const (
	KeyKey            = attribute.Key("distlock.key")
	BackendKey        = attribute.Key("distlock.backend")
	KindKey           = attribute.Key("distlock.kind")
	TokenKey          = attribute.Key("distlock.token")
	AttemptsKey       = attribute.Key("distlock.attempts")
	AcquireResultKey  = attribute.Key("distlock.acquire.result")
	AttemptOutcomeKey = attribute.Key("distlock.attempt.outcome")
	RenewalResultKey  = attribute.Key("distlock.renewal.result")
	HoldEndKey        = attribute.Key("distlock.hold.end")
	LossCauseKey      = attribute.Key("distlock.loss.cause")
)

// An Option configures an [Observer].
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	keyAttr bool
	attrs   []attribute.KeyValue
}

// WithMeterProvider sets the meter provider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the tracer provider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithKeyAttribute adds distlock.key to the metrics' attributes. Spans
// always carry it; metrics do not by default, since every key makes series
// of its own.
func WithKeyAttribute() Option {
	return func(c *config) { c.keyAttr = true }
}

// WithAttributes adds attrs to every metric and span.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Observer is a [distlock.Observer] that records metrics and spans. It is
// safe for concurrent use; give one to any number of clients and mutexes.
type Observer struct {
	tracer  trace.Tracer
	keyAttr bool
	attrs   []attribute.KeyValue

	acquire, attempt, renewal, hold metric.Float64Histogram
	lost                            metric.Int64Counter
	active                          metric.Int64UpDownCounter

	mu    sync.Mutex
	calls map[uint64]*call // by distlock.Event.ID
}

// call is what the observer keeps of one Lock or TryLock call and its holding.
type call struct {
	span    trace.Span // the acquire span, then the hold span
	metrics metric.MeasurementOption
	spanSet []attribute.KeyValue
}

// NewObserver returns an Observer that records with the configured (or
// global) providers. It fails only if an instrument cannot be made.
func NewObserver(opts ...Option) (*Observer, error) {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	meter := c.mp.Meter(ScopeName)
	o := &Observer{
		tracer:  c.tp.Tracer(ScopeName),
		keyAttr: c.keyAttr,
		attrs:   c.attrs,
		calls:   make(map[uint64]*call),
	}
	var err error
	hist := func(name, desc string) metric.Float64Histogram {
		var h metric.Float64Histogram
		if err == nil {
			h, err = meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		}
		return h
	}
	o.acquire = hist("distlock.acquire.duration", "Duration of a Lock or TryLock call, waiting included.")
	o.attempt = hist("distlock.attempt.duration", "Round trip of one acquisition attempt.")
	o.renewal = hist("distlock.renewal.duration", "Round trip of one renewal.")
	o.hold = hist("distlock.hold.duration", "How long a lock was held, until its release or loss.")
	if err != nil {
		return nil, err
	}
	if o.lost, err = meter.Int64Counter("distlock.lease.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases lost, by cause.")); err != nil {
		return nil, err
	}
	if o.active, err = meter.Int64UpDownCounter("distlock.hold.active", metric.WithUnit("{hold}"),
		metric.WithDescription("Locks held now.")); err != nil {
		return nil, err
	}
	return o, nil
}

// Observe records e; see the package doc. An Observer not made by
// [NewObserver] records nothing.
func (o *Observer) Observe(ctx context.Context, e distlock.Event) {
	if o == nil || o.calls == nil {
		return
	}
	now := time.Now()
	c := o.call(ctx, e, now)
	if c == nil {
		return
	}
	switch e.Type {
	case distlock.EventAttempt:
		o.attempt.Record(ctx, e.Latency.Seconds(), c.metrics,
			metric.WithAttributes(AttemptOutcomeKey.String(e.Outcome.String())))
		c.span.AddEvent("attempt", trace.WithTimestamp(now), trace.WithAttributes(
			AttemptOutcomeKey.String(e.Outcome.String()), AttemptsKey.Int(e.Attempts)))
	case distlock.EventAcquired:
		o.acquire.Record(ctx, e.Wait.Seconds(), c.metrics, metric.WithAttributes(AcquireResultKey.String("acquired")))
		o.active.Add(ctx, 1, c.metrics)
		c.span.SetAttributes(TokenKey.Int64(int64(e.Token)), AttemptsKey.Int(e.Attempts))
		c.span.End(trace.WithTimestamp(now))
		attrs := append(c.spanSet[:len(c.spanSet):len(c.spanSet)], TokenKey.Int64(int64(e.Token)))
		_, c.span = o.tracer.Start(ctx, "distlock.hold", trace.WithTimestamp(now),
			trace.WithLinks(trace.LinkFromContext(trace.ContextWithSpan(ctx, c.span))),
			trace.WithAttributes(attrs...))
	case distlock.EventFailed:
		o.acquire.Record(ctx, e.Wait.Seconds(), c.metrics, metric.WithAttributes(AcquireResultKey.String("failed")))
		c.span.SetAttributes(AttemptsKey.Int(e.Attempts))
		c.span.SetStatus(codes.Error, errMessage(e.Err))
		c.span.End(trace.WithTimestamp(now))
		o.forget(e.ID)
	case distlock.EventRenewed:
		o.renewal.Record(ctx, e.Latency.Seconds(), c.metrics, metric.WithAttributes(RenewalResultKey.String("renewed")))
		c.span.AddEvent("renewed", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.Float64("distlock.renewal.latency", e.Latency.Seconds()),
			attribute.Float64("distlock.valid_for", e.ValidFor.Seconds())))
	case distlock.EventRenewalFailed:
		o.renewal.Record(ctx, e.Latency.Seconds(), c.metrics, metric.WithAttributes(RenewalResultKey.String("failed")))
		c.span.AddEvent("renewal failed", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.String("error.message", errMessage(e.Err))))
	case distlock.EventLost:
		cause := e.Cause.String()
		o.lost.Add(ctx, 1, c.metrics, metric.WithAttributes(LossCauseKey.String(cause)))
		o.ended(ctx, c, e, "lost")
		c.span.AddEvent("lost", trace.WithTimestamp(now), trace.WithAttributes(
			LossCauseKey.String(cause), attribute.Float64("distlock.late", e.Late.Seconds())))
		c.span.SetStatus(codes.Error, "lease lost: "+cause)
		c.span.End(trace.WithTimestamp(now))
		o.forget(e.ID)
	case distlock.EventReleased:
		o.ended(ctx, c, e, "released")
		if e.Err != nil {
			c.span.SetStatus(codes.Error, e.Err.Error())
		}
		c.span.End(trace.WithTimestamp(now))
		o.forget(e.ID)
	}
}

// errMessage is err's text, or "" for a nil error (an event made by hand).
func errMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ended records the end of a holding.
func (o *Observer) ended(ctx context.Context, c *call, e distlock.Event, how string) {
	o.hold.Record(ctx, e.Held.Seconds(), c.metrics, metric.WithAttributes(HoldEndKey.String(how)))
	o.active.Add(ctx, -1, c.metrics)
}

// call returns the state of e's call, made at its first attempt (or its
// failure without one), or nil for an event of a call the observer did not
// see begin.
func (o *Observer) call(ctx context.Context, e distlock.Event, now time.Time) *call {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c := o.calls[e.ID]; c != nil {
		return c
	}
	// A call begins with its first attempt, or ends before any: it
	// waited its turn behind other goroutines of its client, in vain.
	first := e.Type == distlock.EventAttempt && e.Attempts == 1
	if !first && (e.Type != distlock.EventFailed || e.Attempts != 0) {
		return nil
	}
	common := make([]attribute.KeyValue, 0, len(o.attrs)+3)
	common = append(common, o.attrs...)
	common = append(common, BackendKey.String(e.Backend), KindKey.String(e.Kind.String()))
	metricAttrs := common
	if o.keyAttr {
		metricAttrs = append(metricAttrs[:len(metricAttrs):len(metricAttrs)], KeyKey.String(e.Key))
	}
	spanAttrs := append(common[:len(common):len(common)], KeyKey.String(e.Key))
	c := &call{
		metrics: metric.WithAttributeSet(attribute.NewSet(metricAttrs...)),
		spanSet: spanAttrs,
	}
	_, c.span = o.tracer.Start(ctx, "distlock.acquire", trace.WithTimestamp(now.Add(-e.Wait)),
		trace.WithAttributes(spanAttrs...))
	o.calls[e.ID] = c
	return c
}

// forget drops the state of a call that has ended.
func (o *Observer) forget(id uint64) {
	o.mu.Lock()
	delete(o.calls, id)
	o.mu.Unlock()
}
