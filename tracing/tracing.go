package tracing

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// ScopeName is the instrumentation scope of the tracer and meter: this
// package's import path.
const ScopeName = "github.com/tenure-go/tenure/tracing"

// Span names.
const (
	SpanAcquire = "tenure.lease.acquire"
	SpanHold    = "tenure.lease.hold"
	SpanExtend  = "tenure.lease.extend"
	SpanRelease = "tenure.lease.release"
)

// Event names, on the hold span.
const (
	EventRenewalFailed = "tenure.lease.renewal.failed"
	EventLost          = "tenure.lease.lost"
)

// Attribute keys.
const (
	KeyName          = attribute.Key("tenure.lease.name")
	KeyFence         = attribute.Key("tenure.lease.fence")
	KeyTTL           = attribute.Key("tenure.lease.ttl")              // seconds
	KeyAttempts      = attribute.Key("tenure.lease.acquire.attempts") // round trips that tried to take the name
	KeyWait          = attribute.Key("tenure.lease.acquire.wait")     // seconds
	KeyAcquireResult = attribute.Key("tenure.lease.acquire.result")
	KeyRenewalResult = attribute.Key("tenure.lease.renewal.result")
	KeyLossCause     = attribute.Key("tenure.lease.loss.cause")
	KeyEndCause      = attribute.Key("tenure.lease.end.cause")
	KeyErrorType     = semconv.ErrorTypeKey // error.type
	// KeyElectionName is an election's name, on MetricLeader only.
	KeyElectionName = attribute.Key("tenure.election.name")
)

// Metric names.
const (
	MetricAcquireDuration = "tenure.lease.acquire.duration"
	MetricWaitDuration    = "tenure.lease.wait.duration"
	MetricHeld            = "tenure.lease.held"
	MetricRenewals        = "tenure.lease.renewals"
	MetricHoldDuration    = "tenure.lease.hold.duration"

	// MetricLosses counts every lease that ended lost (lease.ErrLost), by
	// tenure.lease.loss.cause: the lease's EndInfo.Loss ("deleted",
	// "taken_over" or "expired"), the same value as the hold span's
	// "tenure.lease.lost" event. A reason this package does not know (from
	// a later lease package) is counted under its own value, and a loss
	// without a reason under "unknown": no loss goes uncounted.
	MetricLosses = "tenure.lease.losses"

	// MetricLeader is 1 while an election observed with ObserveElection
	// leads in this process (election.Election.IsLeader), else 0, by
	// tenure.election.name.
	MetricLeader = "tenure.election.leader"
)

const (
	errorTypeOther    = "_OTHER"
	resultAcquired    = "acquired"
	resultNotAcquired = "not_acquired"
	resultError       = "error"
	renewalRenewed    = "renewed"
	renewalFailed     = "failed"
	endReleased       = "released"
	endLost           = "lost"
	endClosed         = "closed"
	lossUnknown       = "unknown"
)

// lossReasons are the reasons package lease gives for a loss; their
// measurement options are precomputed.
var lossReasons = []lease.LossReason{lease.LossDeleted, lease.LossTakenOver, lease.LossExpired}

// lossCause is the tenure.lease.loss.cause of a lost lease: its reason, or
// lossUnknown when it has none.
func lossCause(r lease.LossReason) string {
	if r == "" {
		return lossUnknown
	}
	return string(r)
}

// Option configures New.
type Option func(*config)

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets the TracerProvider spans come from; by default the
// global one (otel.GetTracerProvider) at the time New is called. A nil
// provider keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithMeterProvider sets the MeterProvider metrics go to; by default the
// global one (otel.GetMeterProvider) at the time New is called. A nil
// provider keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// Version returns the version of the tenure module this binary was built
// with, as the build recorded it, or "" when unknown (a development build of
// tenure itself). It is the instrumentation scope's version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const module = "github.com/tenure-go/tenure"
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path == module {
			if m.Replace != nil {
				m = m.Replace
			}
			if strings.HasPrefix(m.Version, "v") {
				return m.Version
			}
			return ""
		}
	}
	return ""
}

// Instrumentation turns a Manager's hooks into spans and metrics. Create it
// with New and give Hooks to lease.WithHooks; one Instrumentation may serve
// any number of managers. It is safe for concurrent use.
type Instrumentation struct {
	tracer trace.Tracer
	meter  metric.Meter
	leader metric.Int64ObservableGauge

	acquireDuration metric.Float64Histogram
	waitDuration    metric.Float64Histogram
	held            metric.Int64UpDownCounter
	renewals        metric.Int64Counter
	losses          metric.Int64Counter
	holdDuration    metric.Float64Histogram

	// Precomputed measurement options: the hooks build no attribute set.
	acquired, notAcquired []metric.RecordOption
	acquireErr            map[string][]metric.RecordOption // by error.type
	renewOK, renewFailed  []metric.AddOption
	lostOpts              map[string][]metric.AddOption    // by loss cause
	endOpts               map[string][]metric.RecordOption // by end cause
}

// errorTypes are the values of error.type: the lease package's sentinels
// and the context's errors, then errorTypeOther.
var errorTypes = []struct {
	err  error
	name string
}{
	{lease.ErrClosed, "closed"},
	{lease.ErrInvalidName, "invalid_name"},
	{lease.ErrInvalidOption, "invalid_option"},
	{lease.ErrNotHeld, "not_held"},
	{lease.ErrLost, "lost"},
	{lease.ErrOverloaded, "overloaded"},
	{lease.ErrNotAcquired, "not_acquired"},
	{context.DeadlineExceeded, "timeout"},
	{context.Canceled, "canceled"},
}

// errorType returns the low-cardinality error.type of err.
func errorType(err error) string {
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return errorTypeOther
}

// New returns the instrumentation for the providers that opts choose. It
// fails only if the MeterProvider refuses to create an instrument.
func New(opts ...Option) (*Instrumentation, error) {
	c := newConfig(opts)
	version := Version()
	i := &Instrumentation{
		tracer: c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version), trace.WithSchemaURL(semconv.SchemaURL)),
		meter:  c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version), metric.WithSchemaURL(semconv.SchemaURL)),
	}
	if err := i.newInstruments(); err != nil {
		return nil, err
	}
	i.precomputeOptions()
	return i, nil
}

// newConfig applies opts, then takes the global providers for what they
// left unset: read now, so that a later otel.Set*Provider does not change
// an Instrumentation already made.
func newConfig(opts []Option) config {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return c
}

// newInstruments creates the metric instruments on i.meter. It tries every
// one, so that the error names all that the MeterProvider refused.
func (i *Instrumentation) newInstruments() error {
	// Bucket boundaries in seconds: the SDK's default ones suit milliseconds.
	short := metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	long := metric.WithExplicitBucketBoundaries(0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400)
	meter := i.meter
	var err, e error
	i.acquireDuration, e = meter.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"), short,
		metric.WithDescription("How long acquisitions took, from start to result, by result."))
	err = errors.Join(err, e)
	i.waitDuration, e = meter.Float64Histogram(MetricWaitDuration, metric.WithUnit("s"), short,
		metric.WithDescription("How long acquisitions that found the name held waited, from start to result, by result."))
	err = errors.Join(err, e)
	i.held, e = meter.Int64UpDownCounter(MetricHeld, metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held."))
	err = errors.Join(err, e)
	i.renewals, e = meter.Int64Counter(MetricRenewals, metric.WithUnit("{renewal}"),
		metric.WithDescription("Automatic renewals, by result; a failed one is retried until the lease's local deadline."))
	err = errors.Join(err, e)
	i.losses, e = meter.Int64Counter(MetricLosses, metric.WithUnit("{lease}"),
		metric.WithDescription("Leases lost, every one, by cause."))
	err = errors.Join(err, e)
	i.holdDuration, e = meter.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"), long,
		metric.WithDescription("How long leases were held, from the acquire's result to their end, by how they ended."))
	err = errors.Join(err, e)
	i.leader, e = meter.Int64ObservableGauge(MetricLeader, metric.WithUnit("{leader}"),
		metric.WithDescription("1 while this process leads the election, else 0, by election name."))
	return errors.Join(err, e)
}

// precomputeOptions builds the measurement options of every attribute set
// the hooks record with, so that the hooks themselves build none.
func (i *Instrumentation) precomputeOptions() {
	record := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	add := func(kv ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	i.acquired = record(KeyAcquireResult.String(resultAcquired))
	i.notAcquired = record(KeyAcquireResult.String(resultNotAcquired))
	i.acquireErr = map[string][]metric.RecordOption{}
	for _, t := range errorTypes {
		i.acquireErr[t.name] = record(KeyAcquireResult.String(resultError), KeyErrorType.String(t.name))
	}
	i.acquireErr[errorTypeOther] = record(KeyAcquireResult.String(resultError), KeyErrorType.String(errorTypeOther))
	i.renewOK = add(KeyRenewalResult.String(renewalRenewed))
	i.renewFailed = add(KeyRenewalResult.String(renewalFailed))
	i.lostOpts = map[string][]metric.AddOption{}
	for _, r := range lossReasons {
		i.lostOpts[lossCause(r)] = add(KeyLossCause.String(lossCause(r)))
	}
	i.lostOpts[lossUnknown] = add(KeyLossCause.String(lossUnknown))
	i.endOpts = map[string][]metric.RecordOption{}
	for _, c := range []string{endReleased, endLost, endClosed} {
		i.endOpts[c] = record(KeyEndCause.String(c))
	}
}

// ObserveElection reports whether e leads in this process as the gauge
// MetricLeader (1 or 0, read from e.IsLeader at each collection, without a
// round trip), with the attribute tenure.election.name. Unlike a lease's,
// an election's name goes on the metric: elections are few, named by the
// program rather than by its users, and a dashboard must tell them apart.
// Unregister the returned registration when e is no longer used.
func (i *Instrumentation) ObserveElection(e *election.Election) (metric.Registration, error) {
	opts := []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(KeyElectionName.String(e.Name())))}
	return i.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var v int64
		if e.IsLeader() {
			v = 1
		}
		o.ObserveInt64(i.leader, v, opts...)
		return nil
	}, i.leader)
}

// Hooks returns the hooks to pass to lease.WithHooks.
func (i *Instrumentation) Hooks() lease.Hooks {
	return lease.Hooks{
		AcquireStart: i.acquireStart,
		AcquireDone:  i.acquireDone,
		Renewed:      i.renewed,
		ExtendStart:  i.extendStart,
		ExtendDone:   i.spanDone,
		ReleaseStart: i.releaseStart,
		ReleaseDone:  i.spanDone,
		Ended:        i.ended,
	}
}

// stateKey is the context key of a lease's *state. AcquireStart puts it in
// the context that becomes the lease's, so the later hooks find it through
// Lease.Context() without a map shared by all leases.
type stateKey struct{}

// state is what the instrumentation keeps of one acquisition and its lease.
type state struct {
	acquire trace.Span

	mu    sync.Mutex
	hold  trace.Span     // started when the acquire succeeds
	ended *lease.EndInfo // set when the lease ended before its hold span started
}

func stateOf(l *lease.Lease) *state {
	s, _ := l.Context().Value(stateKey{}).(*state)
	return s
}

func (i *Instrumentation) acquireStart(ctx context.Context, name string) context.Context {
	ctx, span := i.tracer.Start(ctx, SpanAcquire,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyName.String(name)))
	return context.WithValue(ctx, stateKey{}, &state{acquire: span})
}

func (i *Instrumentation) acquireDone(ctx context.Context, info lease.AcquireInfo) {
	s, _ := ctx.Value(stateKey{}).(*state)
	if s == nil { // another AcquireStart made ctx; nothing to end
		return
	}
	wait := info.Waited.Seconds()
	span := s.acquire
	span.SetAttributes(KeyAttempts.Int(info.Attempts), KeyWait.Float64(wait))
	opts := i.acquired
	switch {
	case info.Err == nil && info.Lease != nil:
		span.SetAttributes(KeyAcquireResult.String(resultAcquired), KeyFence.Int64(info.Lease.Fence()))
	case errors.Is(info.Err, lease.ErrNotAcquired) && !errors.Is(info.Err, lease.ErrOverloaded):
		opts = i.notAcquired
		span.SetAttributes(KeyAcquireResult.String(resultNotAcquired))
	default:
		t := errorType(info.Err)
		opts = i.acquireErr[t]
		span.SetAttributes(KeyAcquireResult.String(resultError), KeyErrorType.String(t))
		span.SetStatus(codes.Error, errString(info.Err))
	}
	i.acquireDuration.Record(ctx, wait, opts...)
	if info.Attempts > 1 {
		i.waitDuration.Record(ctx, wait, opts...)
	}
	span.End()
	if info.Lease == nil {
		return
	}

	i.held.Add(ctx, 1)
	_, h := i.tracer.Start(ctx, SpanHold, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyName.String(info.Name), KeyFence.Int64(info.Lease.Fence())))
	s.mu.Lock()
	s.hold = h
	ended := s.ended
	s.mu.Unlock()
	if ended != nil { // the lease ended before AcquireDone: Ended left it to us
		endHold(h, *ended)
	}
}

// renewed counts a renewal; a failed one is also an event on the hold span.
// It runs on the watchdog's goroutines: a successful renewal costs one
// counter increment with a precomputed attribute set.
func (i *Instrumentation) renewed(l *lease.Lease, err error) {
	if err == nil {
		i.renewals.Add(context.Background(), 1, i.renewOK...)
		return
	}
	i.renewals.Add(context.Background(), 1, i.renewFailed...)
	if s := stateOf(l); s != nil {
		s.mu.Lock()
		h := s.hold
		s.mu.Unlock()
		if h != nil {
			h.AddEvent(EventRenewalFailed, trace.WithAttributes(
				KeyErrorType.String(errorType(err)),
				attribute.String("exception.message", errString(err))))
		}
	}
}

func (i *Instrumentation) ended(l *lease.Lease, info lease.EndInfo) {
	ctx := context.Background()
	i.held.Add(ctx, -1)
	i.holdDuration.Record(ctx, info.Held.Seconds(), i.endOpts[endCause(info.Cause)]...)
	if endCause(info.Cause) == endLost { // every loss, whatever its reason
		cause := lossCause(info.Loss)
		opts, ok := i.lostOpts[cause]
		if !ok { // a reason added to package lease after this one
			opts = []metric.AddOption{metric.WithAttributes(KeyLossCause.String(cause))}
		}
		i.losses.Add(ctx, 1, opts...)
	}
	s := stateOf(l)
	if s == nil {
		return
	}
	s.mu.Lock()
	h := s.hold
	if h == nil {
		s.ended = &info
	}
	s.mu.Unlock()
	if h != nil {
		endHold(h, info)
	}
}

// endHold ends a hold span as info says the lease ended.
func endHold(h trace.Span, info lease.EndInfo) {
	cause := endCause(info.Cause)
	if cause == endLost {
		loss := lossCause(info.Loss)
		h.AddEvent(EventLost, trace.WithAttributes(KeyLossCause.String(loss)))
		h.SetStatus(codes.Error, "lease lost: "+loss)
	}
	h.SetAttributes(KeyEndCause.String(cause))
	h.End()
}

func endCause(err error) string {
	switch {
	case errors.Is(err, lease.ErrLost):
		return endLost
	case errors.Is(err, lease.ErrClosed):
		return endClosed
	default:
		return endReleased
	}
}

func (i *Instrumentation) extendStart(ctx context.Context, l *lease.Lease, ttl time.Duration) context.Context {
	ctx, _ = i.tracer.Start(ctx, SpanExtend, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyName.String(l.Name()), KeyFence.Int64(l.Fence()), KeyTTL.Float64(ttl.Seconds())))
	return ctx
}

func (i *Instrumentation) releaseStart(ctx context.Context, l *lease.Lease) context.Context {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyName.String(l.Name()), KeyFence.Int64(l.Fence()))}
	if s := stateOf(l); s != nil {
		s.mu.Lock()
		h := s.hold
		s.mu.Unlock()
		if h != nil {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: h.SpanContext()}))
		}
	}
	ctx, _ = i.tracer.Start(ctx, SpanRelease, opts...)
	return ctx
}

// spanDone ends the extend or release span that ctx carries.
func (i *Instrumentation) spanDone(ctx context.Context, _ *lease.Lease, err error) {
	span := trace.SpanFromContext(ctx)
	if err != nil {
		span.SetAttributes(KeyErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, errString(err))
	}
	span.End()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
