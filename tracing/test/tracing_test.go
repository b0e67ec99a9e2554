package tracing_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
	"github.com/tenure-go/tenure/tracing"
)

// redisAddr is the server of the test binary's own, for the examples.
var redisAddr string

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// rig is an instrumented manager with an in-memory span recorder and a
// manual metric reader.
type rig struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	m      *lease.Manager
}

func newRig(t *testing.T, c redis.UniversalClient, opts ...lease.Option) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	inst, err := tracing.New(tracing.WithTracerProvider(r.tp), tracing.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]lease.Option{lease.WithLogger(slog.New(slog.DiscardHandler)), lease.WithHooks(inst.Hooks())}, opts...)
	r.m, err = lease.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.m.Close() })
	return r
}

// ended returns the ended spans named name.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span named name, waiting up to 2s for it: the
// hold span ends in the Ended hook, which runs just after the lease's
// context is cancelled.
func (r *rig) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := r.ended(name)
		if len(got) == 1 {
			return got[0]
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d ended spans named %q, want 1", len(got), name)
		}
	}
}

func (r *rig) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != tracing.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, tracing.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, kv attribute.KeyValue) {
	t.Helper()
	if got, ok := attrs(s)[kv.Key]; !ok || got != kv.Value {
		t.Errorf("span %s: %s = %v (present %v), want %v", s.Name(), kv.Key, got.String(), ok, kv.Value.String())
	}
}

func eventAttr(ev sdktrace.Event, key attribute.Key) attribute.Value {
	for _, kv := range ev.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func childOf(t *testing.T, child sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanID() || child.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("span %s: parent %v, want %v", child.Name(), child.Parent().SpanID(), parent.SpanID())
	}
}

// points returns the data points of a metric whose attribute key has value
// (all points if key is empty), summed: the count for a histogram, the value
// for a sum.
func points(t *testing.T, data map[string]metricdata.Aggregation, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	var n int64
	match := func(set attribute.Set) bool {
		for _, want := range kv {
			if got, ok := set.Value(want.Key); !ok || got != want.Value {
				return false
			}
		}
		return true
	}
	switch d := data[name].(type) {
	case nil:
		return 0
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				n += int64(p.Count)
			}
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				n += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				n += p.Value
			}
		}
	default:
		t.Fatalf("metric %s: unexpected data %T", name, d)
	}
	return n
}

func TestAcquireHoldRelease(t *testing.T) {
	srv := redistest.Start(t)
	interval := 40 * time.Millisecond
	r := newRig(t, srv.Client(t), lease.WithTTL(300*time.Millisecond), lease.WithRenewInterval(interval))
	test := r.tp.Tracer("test")
	ctx, request := test.Start(context.Background(), "request")

	l, err := r.m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	workCtx, work := test.Start(l.Context(), "work")
	time.Sleep(4 * interval) // a few renewals
	if err := l.Extend(workCtx, 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	work.End()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	request.End()

	acquire := r.one(t, tracing.SpanAcquire)
	hold := r.one(t, tracing.SpanHold)
	extend := r.one(t, tracing.SpanExtend)
	release := r.one(t, tracing.SpanRelease)
	workSpan := r.one(t, "work")

	childOf(t, acquire, request.SpanContext())
	childOf(t, workSpan, acquire.SpanContext()) // work under the lease is traced as the acquire's child
	childOf(t, hold, acquire.SpanContext())
	childOf(t, extend, workSpan.SpanContext())
	childOf(t, release, request.SpanContext())
	if links := release.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != hold.SpanContext().SpanID() {
		t.Errorf("release links %v, want the hold span", links)
	}
	for _, s := range []sdktrace.ReadOnlySpan{acquire, hold, extend, release} {
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %s: kind %v", s.Name(), s.SpanKind())
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("span %s: status %v", s.Name(), s.Status())
		}
		if s.InstrumentationScope().Name != tracing.ScopeName {
			t.Errorf("span %s: scope %q", s.Name(), s.InstrumentationScope().Name)
		}
		wantAttr(t, s, tracing.KeyName.String("job"))
		wantAttr(t, s, tracing.KeyFence.Int64(l.Fence()))
	}
	wantAttr(t, acquire, tracing.KeyAcquireResult.String("acquired"))
	wantAttr(t, acquire, tracing.KeyAttempts.Int(1))
	if w := attrs(acquire)[tracing.KeyWait].AsFloat64(); w <= 0 || w > 1 {
		t.Errorf("acquire wait = %vs", w)
	}
	wantAttr(t, extend, tracing.KeyTTL.Float64(0.4))
	wantAttr(t, hold, tracing.KeyEndCause.String("released"))
	for _, e := range hold.Events() { // a renewal may time out on a loaded machine
		if e.Name != tracing.EventRenewalFailed {
			t.Errorf("unexpected hold event %v", e)
		}
	}

	data := r.metrics(t)
	for name, want := range map[string]int64{
		tracing.MetricAcquireDuration: 1,
		tracing.MetricWaitDuration:    0,
		tracing.MetricHeld:            0,
		tracing.MetricLosses:          0,
		tracing.MetricHoldDuration:    1,
	} {
		if got := points(t, data, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := points(t, data, tracing.MetricAcquireDuration, tracing.KeyAcquireResult.String("acquired")); got != 1 {
		t.Errorf("acquisitions with result acquired = %d", got)
	}
	if got := points(t, data, tracing.MetricHoldDuration, tracing.KeyEndCause.String("released")); got != 1 {
		t.Errorf("holds ended by release = %d", got)
	}
	if got := points(t, data, tracing.MetricRenewals, tracing.KeyRenewalResult.String("renewed")); got < 2 {
		t.Errorf("renewals = %d, want at least 2 in %v", got, 4*interval)
	}
	if got := points(t, data, tracing.MetricRenewals, tracing.KeyRenewalResult.String("failed")); got != int64(len(hold.Events())) {
		t.Errorf("failed renewals counted %d, events %d", got, len(hold.Events()))
	}
	h := data[tracing.MetricHoldDuration].(metricdata.Histogram[float64])
	if sum := h.DataPoints[0].Sum; sum < (4 * interval).Seconds() {
		t.Errorf("hold duration %vs, want at least %v", sum, 4*interval)
	}
}

func TestLossTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	interval := 40 * time.Millisecond
	r := newRig(t, srv.Client(t), lease.WithTTL(300*time.Millisecond), lease.WithRenewInterval(interval))
	ctx := context.Background()

	var workErr error
	err := r.m.Do(ctx, "doomed", func(ctx context.Context) error {
		if err := raw.Set(ctx, "tenure:{doomed}", "intruder", time.Minute).Err(); err != nil {
			return err
		}
		<-ctx.Done()
		workErr = context.Cause(ctx)
		return nil
	})
	if !errors.Is(err, lease.ErrLost) || !errors.Is(workErr, lease.ErrLost) {
		t.Fatalf("Do = %v, work's cause %v; want ErrLost", err, workErr)
	}

	hold := r.one(t, tracing.SpanHold)
	if st := hold.Status(); st.Code != codes.Error {
		t.Errorf("hold status %v, want Error", st)
	}
	wantAttr(t, hold, tracing.KeyEndCause.String("lost"))
	// The loss is the last event; a renewal that timed out on a loaded
	// machine may come before it.
	ev := hold.Events()
	if len(ev) == 0 || ev[len(ev)-1].Name != tracing.EventLost {
		t.Fatalf("hold events %v, want %s last", ev, tracing.EventLost)
	}
	for _, e := range ev[:len(ev)-1] {
		if e.Name != tracing.EventRenewalFailed {
			t.Errorf("unexpected hold event %v", e)
		}
	}
	if v := eventAttr(ev[len(ev)-1], tracing.KeyLossCause); v.AsString() != "taken_over" {
		t.Errorf("loss cause %v", v.String())
	}
	release := r.one(t, tracing.SpanRelease)
	if release.Status().Code != codes.Error {
		t.Errorf("release of a lost lease: status %v, want Error", release.Status())
	}
	wantAttr(t, release, tracing.KeyErrorType.String("not_held"))
	if acquire := r.one(t, tracing.SpanAcquire); acquire.Status().Code != codes.Unset {
		t.Errorf("acquire status %v", acquire.Status())
	}

	data := r.metrics(t)
	if got := points(t, data, tracing.MetricLosses, tracing.KeyLossCause.String("taken_over")); got != 1 {
		t.Errorf("losses taken over = %d, want 1", got)
	}
	if got := points(t, data, tracing.MetricHeld); got != 0 {
		t.Errorf("held = %d, want 0", got)
	}
	if got := points(t, data, tracing.MetricHoldDuration, tracing.KeyEndCause.String("lost")); got != 1 {
		t.Errorf("holds ended by loss = %d, want 1", got)
	}
}

// TestLossExpired cuts the holder off from Redis: its renewals fail (events
// on the hold span) until the local deadline, when the lease expires.
func TestLossExpired(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	interval := 50 * time.Millisecond
	r := newRig(t, c, lease.WithTTL(400*time.Millisecond), lease.WithRenewInterval(interval))
	ctx := context.Background()

	l, err := r.m.Acquire(ctx, "cut-off")
	if err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole(true)
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second): // generous: CI is loaded
		t.Fatal("the lease outlived its deadline")
	}
	hold := r.one(t, tracing.SpanHold)
	proxy.BlackHole(false)

	if hold.Status().Code != codes.Error {
		t.Errorf("hold status %v, want Error", hold.Status())
	}
	var failed, lost int
	for _, ev := range hold.Events() {
		switch ev.Name {
		case tracing.EventRenewalFailed:
			failed++
			if v := eventAttr(ev, tracing.KeyErrorType); v.AsString() == "" {
				t.Errorf("renewal failure without error.type: %v", ev.Attributes)
			}
		case tracing.EventLost:
			lost++
			if v := eventAttr(ev, tracing.KeyLossCause); v.AsString() != "expired" {
				t.Errorf("loss cause %v", v.String())
			}
		}
	}
	if failed == 0 || lost != 1 {
		t.Errorf("hold events: %d renewal failures, %d losses; want some and 1", failed, lost)
	}
	data := r.metrics(t)
	if got := points(t, data, tracing.MetricLosses, tracing.KeyLossCause.String("expired")); got != 1 {
		t.Errorf("losses expired = %d, want 1", got)
	}
	// A renewal that fails after the loss is counted, but the hold span has ended.
	if got := points(t, data, tracing.MetricRenewals, tracing.KeyRenewalResult.String("failed")); got < int64(failed) {
		t.Errorf("failed renewals counted %d, events %d", got, failed)
	}
}

func TestContentionAndErrors(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t, srv.Client(t))
	ctx := context.Background()

	first, err := r.m.Acquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.TryAcquire(ctx, "busy"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held name = %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.m.Do(ctx, "busy", func(context.Context) error { return nil }); err != nil {
			t.Error(err)
		}
	})
	time.Sleep(50 * time.Millisecond)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := r.m.TryAcquire(ctx, ""); !errors.Is(err, lease.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}

	var waited, notAcquired, invalid int
	for _, s := range r.ended(tracing.SpanAcquire) {
		a := attrs(s)
		switch a[tracing.KeyAcquireResult].AsString() {
		case "acquired":
			if a[tracing.KeyAttempts].AsInt64() > 1 {
				waited++
				if w := a[tracing.KeyWait].AsFloat64(); w < 0.04 {
					t.Errorf("waiter's wait %vs, want at least 40ms", w)
				}
			}
		case "not_acquired":
			notAcquired++
			if s.Status().Code != codes.Unset {
				t.Errorf("TryAcquire of a held name: status %v, want Unset", s.Status())
			}
		case "error":
			invalid++
			if s.Status().Code != codes.Error || a[tracing.KeyErrorType].AsString() != "invalid_name" {
				t.Errorf("invalid name: status %v, error.type %q", s.Status(), a[tracing.KeyErrorType].AsString())
			}
		}
	}
	if waited != 1 || notAcquired != 1 || invalid != 1 {
		t.Errorf("acquire spans: %d waited, %d not acquired, %d invalid; want 1 each", waited, notAcquired, invalid)
	}
	data := r.metrics(t)
	if got := points(t, data, tracing.MetricWaitDuration, tracing.KeyAcquireResult.String("acquired")); got != 1 {
		t.Errorf("waits = %d, want 1", got)
	}
	if got := points(t, data, tracing.MetricAcquireDuration); got != 4 {
		t.Errorf("acquisitions = %d, want 4", got)
	}
	if got := points(t, data, tracing.MetricAcquireDuration, tracing.KeyErrorType.String("invalid_name")); got != 1 {
		t.Errorf("invalid-name acquisitions = %d, want 1", got)
	}
}

// TestRenewedDoesNotAllocate checks the renewal hook, which the watchdog
// calls for every renewal, allocates nothing with the SDK behind it.
func TestRenewedDoesNotAllocate(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	inst, err := tracing.New(tracing.WithMeterProvider(mp), tracing.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	renewed := inst.Hooks().Renewed
	renewed(nil, nil) // the first measurement creates the data point
	if n := testing.AllocsPerRun(1000, func() { renewed(nil, nil) }); n != 0 {
		t.Errorf("Renewed allocates %v times a call", n)
	}
}

// TestEveryLossCounted causes each loss the lease package reports, for real,
// and checks tenure.lease.losses counts each one under the cause its hold
// span gives: the key deleted (as by a restart without data, an eviction or
// tenure release --force), taken over by another token, and expired (Redis
// unreachable past the local deadline).
func TestEveryLossCounted(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	// A TTL long enough that no lease expires by accident on a loaded
	// machine before its turn comes.
	r := newRig(t, c, lease.WithTTL(3*time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := context.Background()

	causes := []struct {
		reason lease.LossReason
		cause  func(t *testing.T)
	}{
		{lease.LossDeleted, func(t *testing.T) {
			if err := raw.Del(ctx, "tenure:{"+string(lease.LossDeleted)+"}").Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{lease.LossTakenOver, func(t *testing.T) {
			if err := raw.Set(ctx, "tenure:{"+string(lease.LossTakenOver)+"}", "intruder", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{lease.LossExpired, func(*testing.T) { proxy.BlackHole(true) }},
	}
	leases := map[lease.LossReason]*lease.Lease{}
	for _, c := range causes { // named after the loss each will suffer
		l, err := r.m.Acquire(ctx, string(c.reason))
		if err != nil {
			t.Fatal(err)
		}
		leases[c.reason] = l
	}

	for n, c := range causes {
		l := leases[c.reason]
		c.cause(t)
		select {
		case <-l.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the lease was not lost", c.reason)
		}
		if err := l.Err(); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("%s: lease ended with %v, want ErrLost", c.reason, err)
		}
		// The Ended hook counts the loss just after the context is
		// cancelled, and ends the hold span after counting it.
		for deadline := time.Now().Add(30 * time.Second); len(r.ended(tracing.SpanHold)) < n+1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the hold span did not end", c.reason)
			}
		}
		data := r.metrics(t)
		for i, c2 := range causes {
			want := int64(0)
			if i <= n {
				want = 1
			}
			if got := points(t, data, tracing.MetricLosses, tracing.KeyLossCause.String(string(c2.reason))); got != want {
				t.Errorf("after the %s loss: losses with cause %s = %d, want %d", c.reason, c2.reason, got, want)
			}
		}
		if got := points(t, data, tracing.MetricLosses); got != int64(n+1) {
			t.Errorf("after the %s loss: losses = %d, want %d", c.reason, got, n+1)
		}
	}
	proxy.BlackHole(false)

	// The span and the metric give each loss the same cause.
	spanCauses := map[string]int64{}
	for _, hold := range r.ended(tracing.SpanHold) {
		for _, ev := range hold.Events() {
			if ev.Name == tracing.EventLost {
				spanCauses[eventAttr(ev, tracing.KeyLossCause).AsString()]++
			}
		}
	}
	data := r.metrics(t)
	for _, c := range causes {
		if got, want := spanCauses[string(c.reason)], points(t, data, tracing.MetricLosses, tracing.KeyLossCause.String(string(c.reason))); got != 1 || want != 1 {
			t.Errorf("cause %s: %d hold spans, %d counted; want 1 and 1", c.reason, got, want)
		}
	}
	if got := points(t, data, tracing.MetricHoldDuration, tracing.KeyEndCause.String("lost")); got != int64(len(causes)) {
		t.Errorf("holds ended by loss = %d, want %d", got, len(causes))
	}
}

// TestUnknownLossCounted: a loss whose reason this package does not know (a
// later lease package's) is counted under its own value, and one without a
// reason under "unknown"; a lease that ended otherwise is not a loss.
func TestUnknownLossCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	inst, err := tracing.New(tracing.WithMeterProvider(mp), tracing.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	ended := inst.Hooks().Ended
	ended(nil, lease.EndInfo{Cause: lease.ErrLost, Loss: "evicted"})
	ended(nil, lease.EndInfo{Cause: lease.ErrLost})
	ended(nil, lease.EndInfo{Cause: lease.ErrReleased})
	ended(nil, lease.EndInfo{Cause: lease.ErrClosed})

	r := &rig{reader: reader}
	data := r.metrics(t)
	for cause, want := range map[string]int64{"evicted": 1, "unknown": 1} {
		if got := points(t, data, tracing.MetricLosses, tracing.KeyLossCause.String(cause)); got != want {
			t.Errorf("losses with cause %s = %d, want %d", cause, got, want)
		}
	}
	if got := points(t, data, tracing.MetricLosses); got != 2 {
		t.Errorf("losses = %d, want 2", got)
	}
}
