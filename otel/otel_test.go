package distlockotel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/memlock"
	distlockotel "github.com/distlock-go/distlock/otel"
)

type harness struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *distlockotel.Observer
}

func newHarness(t *testing.T, opts ...distlockotel.Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := distlockotel.NewObserver(append(opts, distlockotel.WithMeterProvider(mp), distlockotel.WithTracerProvider(tp))...)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// metrics returns the data points of every metric, by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != distlockotel.ScopeName {
			t.Errorf("scope %q; want %q", sm.Scope.Name, distlockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// histCounts returns the count of each data point of a histogram, by the
// value of attribute key.
func histCounts(t *testing.T, data metricdata.Aggregation, key attribute.Key) map[string]uint64 {
	t.Helper()
	if data == nil { // nothing recorded yet
		return nil
	}
	h, ok := data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%T; want a float64 histogram", data)
	}
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		v, _ := dp.Attributes.Value(key)
		out[v.AsString()] += dp.Count
		if b, _ := dp.Attributes.Value(distlockotel.BackendKey); b.AsString() != "memlock" {
			t.Errorf("backend attribute %q", b.AsString())
		}
	}
	return out
}

func sumValue(t *testing.T, data metricdata.Aggregation) map[string]int64 {
	t.Helper()
	s, ok := data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%T; want an int64 sum", data)
	}
	out := map[string]int64{}
	for _, dp := range s.DataPoints {
		v, _ := dp.Attributes.Value(distlockotel.LossCauseKey)
		out[v.AsString()] += dp.Value
	}
	return out
}

func attr(attrs []attribute.KeyValue, k attribute.Key) attribute.Value {
	for _, a := range attrs {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func TestWaitAndRelease(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := distlock.New(memlock.New(), distlock.WithSafetyPoll(time.Minute))
	holder, err := c.Mutex("orders:42").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Mutex("orders:42", distlock.WithObserver(h.obs))
	got := make(chan *distlock.Lock, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Let it try, subscribe and try again; then release.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		pts := histCounts(t, h.metrics(t)["distlock.attempt.duration"], distlockotel.AttemptOutcomeKey)
		if pts["held"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempts %v; want 2 held", pts)
		}
	}
	time.Sleep(20 * time.Millisecond) // a visible wait
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	if active := h.metrics(t)["distlock.hold.active"].(metricdata.Sum[int64]); len(active.DataPoints) != 1 || active.DataPoints[0].Value != 1 {
		t.Errorf("holds active while held: %+v; want 1", active.DataPoints)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	ms := h.metrics(t)
	if got := histCounts(t, ms["distlock.attempt.duration"], distlockotel.AttemptOutcomeKey); got["held"] != 2 || got["granted"] != 1 || len(got) != 2 {
		t.Errorf("attempts %v; want 2 held, 1 granted", got)
	}
	acq := ms["distlock.acquire.duration"].(metricdata.Histogram[float64])
	if len(acq.DataPoints) != 1 || acq.DataPoints[0].Count != 1 || acq.DataPoints[0].Sum < 0.02 {
		t.Errorf("acquire durations %+v; want one of at least 20ms", acq.DataPoints)
	}
	if v, _ := acq.DataPoints[0].Attributes.Value(distlockotel.KeyKey); v.AsString() != "" {
		t.Errorf("key %q on a metric without WithKeyAttribute", v.AsString())
	}
	if got := histCounts(t, ms["distlock.hold.duration"], distlockotel.HoldEndKey); got["released"] != 1 || len(got) != 1 {
		t.Errorf("holds %v; want 1 released", got)
	}
	if active := ms["distlock.hold.active"].(metricdata.Sum[int64]); len(active.DataPoints) != 1 || active.DataPoints[0].Value != 0 {
		t.Errorf("holds active after release: %+v; want 0", active.DataPoints)
	}
	if _, ok := ms["distlock.lease.lost"]; ok {
		t.Errorf("a lease lost recorded")
	}

	spans := h.spans.Ended()
	if len(spans) != 2 || spans[0].Name() != "distlock.acquire" || spans[1].Name() != "distlock.hold" {
		t.Fatalf("spans %v; want distlock.acquire, distlock.hold", spans)
	}
	acquire, hold := spans[0], spans[1]
	if got := eventNames(acquire); !slices.Equal(got, []string{"attempt", "attempt", "attempt"}) {
		t.Errorf("acquire span events %v", got)
	}
	if d := acquire.EndTime().Sub(acquire.StartTime()); d < 20*time.Millisecond {
		t.Errorf("acquire span lasts %v; want it to cover the wait", d)
	}
	for _, s := range spans {
		if attr(s.Attributes(), distlockotel.KeyKey).AsString() != "orders:42" ||
			attr(s.Attributes(), distlockotel.BackendKey).AsString() != "memlock" ||
			attr(s.Attributes(), distlockotel.TokenKey).AsInt64() != int64(l.Token()) ||
			s.Status().Code == codes.Error {
			t.Errorf("span %s: attributes %v, status %v", s.Name(), s.Attributes(), s.Status())
		}
	}
	if len(hold.Links()) != 1 || hold.Links()[0].SpanContext.SpanID() != acquire.SpanContext().SpanID() {
		t.Errorf("hold span links %v; want the acquire span", hold.Links())
	}
}

// refusing refuses every renewal: the lease is lost at the first one.
type refusing struct{ *memlock.Backend }

func (refusing) Refresh(context.Context, driver.Lease, time.Duration) (time.Duration, error) {
	return 0, driver.ErrNotHeld
}

func TestLostAndFailed(t *testing.T) {
	h := newHarness(t, distlockotel.WithKeyAttribute())
	ctx := context.Background()
	c := distlock.New(refusing{memlock.New()}, distlock.WithObserver(h.obs), distlock.WithTTL(100*time.Millisecond))
	l, err := c.Mutex("k").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not lost")
	}
	if _, err := c.Mutex("bad", distlock.WithTTL(time.Nanosecond)).TryLock(ctx); err == nil {
		t.Fatal("TryLock with an invalid TTL succeeded")
	}
	// A failed TryLock: held elsewhere.
	other, err := c.Mutex("k2").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("k2").TryLock(ctx); !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("TryLock: %v; want ErrNotObtained", err)
	}
	_ = other.Unlock(ctx)

	// Lost is reported just after Done closes: wait for it.
	var ms map[string]metricdata.Aggregation
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		ms = h.metrics(t)
		if _, ok := ms["distlock.lease.lost"]; ok || time.Now().After(deadline) {
			break
		}
	}
	if got := sumValue(t, ms["distlock.lease.lost"]); got["refused"] != 1 || len(got) != 1 {
		t.Errorf("leases lost %v; want 1 refused", got)
	}
	if got := histCounts(t, ms["distlock.acquire.duration"], distlockotel.AcquireResultKey); got["acquired"] != 2 || got["failed"] != 1 {
		t.Errorf("acquisitions %v; want 2 acquired, 1 failed", got)
	}
	if got := histCounts(t, ms["distlock.hold.duration"], distlockotel.HoldEndKey); got["lost"] != 1 || got["released"] != 1 {
		t.Errorf("holds %v; want 1 lost, 1 released", got)
	}
	var keys []string
	for _, dp := range ms["distlock.acquire.duration"].(metricdata.Histogram[float64]).DataPoints {
		v, _ := dp.Attributes.Value(distlockotel.KeyKey)
		keys = append(keys, v.AsString())
	}
	if slices.Sort(keys); !slices.Equal(slices.Compact(keys), []string{"k", "k2"}) {
		t.Errorf("keys %v; want k and k2 with WithKeyAttribute", keys)
	}

	var lostHold, failed sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		switch {
		case s.Name() == "distlock.hold" && slices.Contains(eventNames(s), "lost"):
			lostHold = s
		case s.Name() == "distlock.acquire" && s.Status().Code == codes.Error:
			failed = s
		}
	}
	if lostHold == nil || lostHold.Status().Code != codes.Error {
		t.Fatalf("no hold span with a loss and an Error status: %v", h.spans.Ended())
	}
	for _, e := range lostHold.Events() {
		if e.Name == "lost" && attr(e.Attributes, distlockotel.LossCauseKey).AsString() != "refused" {
			t.Errorf("lost event attributes %v; want cause refused", e.Attributes)
		}
	}
	if failed == nil || !slices.Equal(eventNames(failed), []string{"attempt"}) {
		t.Errorf("failed acquire span: %v", failed)
	}
}

// TestFailedInLine: goroutines of one client that wait in line for a key
// held elsewhere, and give up before their turn, never reach the backend.
// Their calls failed all the same, and are recorded as such.
func TestFailedInLine(t *testing.T) {
	h := newHarness(t)
	be := memlock.New()
	holder, err := distlock.New(be).Mutex("k").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(context.Background())
	c := distlock.New(be, distlock.WithObserver(h.obs))
	const waiters = 3
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := c.Mutex("k").Lock(ctx)
			errs <- err
		}()
	}
	for range waiters {
		if err := <-errs; !errors.Is(err, distlock.ErrNotObtained) {
			t.Fatalf("Lock: %v; want ErrNotObtained", err)
		}
	}
	got := histCounts(t, h.metrics(t)["distlock.acquire.duration"], distlockotel.AcquireResultKey)
	if got["failed"] != waiters {
		t.Errorf("acquisitions %v; want %d failed, those that waited in line included", got, waiters)
	}
	failed := 0
	for _, s := range h.spans.Ended() {
		if s.Name() == "distlock.acquire" && s.Status().Code == codes.Error {
			failed++
		}
	}
	if failed != waiters {
		t.Errorf("%d failed acquire spans; want %d", failed, waiters)
	}
}

// TestHandMadeEvents: events with fields the library always sets left
// empty, and an Observer not made by NewObserver, are recorded or ignored
// without a panic.
func TestHandMadeEvents(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.obs.Observe(ctx, distlock.Event{Type: distlock.EventAttempt, ID: 7, Attempts: 1, Key: "k"})
	h.obs.Observe(ctx, distlock.Event{Type: distlock.EventFailed, ID: 7, Attempts: 1, Key: "k"})
	h.obs.Observe(ctx, distlock.Event{Type: distlock.EventRenewalFailed, ID: 8, Key: "k"})
	var zero distlockotel.Observer
	zero.Observe(ctx, distlock.Event{Type: distlock.EventAttempt, ID: 1, Attempts: 1})
	var none *distlockotel.Observer
	none.Observe(ctx, distlock.Event{Type: distlock.EventAttempt, ID: 1, Attempts: 1})
}
