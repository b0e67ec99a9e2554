package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
)

// telemetry holds the providers: spans and metrics go to the stdout
// exporters (and OTLP/HTTP when configured), and to in-memory collectors
// for the summary printed at the end.
type telemetry struct {
	tp     *sdktrace.TracerProvider
	mp     *metric.MeterProvider
	tracer trace.Tracer // the example's own spans

	spans   *spanCollector
	reader  *metric.ManualReader
	metrics metricdata.ResourceMetrics // collected at shutdown

	shutdown func() error // flushes and stops the providers; idempotent
}

// newTelemetry sets up the providers, and says where their output goes.
func newTelemetry(ctx context.Context, out io.Writer, say examplecmd.Say) (*telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tenure-traced-example")))
	if err != nil {
		return nil, err
	}
	spanOut, err := stdouttrace.New(stdouttrace.WithWriter(out))
	if err != nil {
		return nil, err
	}
	metricOut, err := stdoutmetric.New(stdoutmetric.WithWriter(out))
	if err != nil {
		return nil, err
	}
	t := &telemetry{spans: &spanCollector{}, reader: metric.NewManualReader()}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithBatcher(spanOut), sdktrace.WithSpanProcessor(t.spans)}
	mpOpts := []metric.Option{metric.WithResource(res), metric.WithReader(metric.NewPeriodicReader(metricOut)), metric.WithReader(t.reader)}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		// Both exporters read OTEL_EXPORTER_OTLP_ENDPOINT and the other
		// OTEL_EXPORTER_OTLP_* variables themselves.
		spanOTLP, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		metricOTLP, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(spanOTLP))
		mpOpts = append(mpOpts, metric.WithReader(metric.NewPeriodicReader(metricOTLP)))
		say("telemetry: stdout exporters, and OTLP/HTTP to %s", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	} else {
		say("telemetry: stdout exporters (set OTEL_EXPORTER_OTLP_ENDPOINT to send OTLP/HTTP too)")
	}
	t.tp = sdktrace.NewTracerProvider(tpOpts...)
	t.mp = metric.NewMeterProvider(mpOpts...)
	t.tracer = t.tp.Tracer("github.com/tenure-go/tenure/examples/traced")
	t.shutdown = sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(
			t.reader.Collect(ctx, &t.metrics),
			t.tp.Shutdown(ctx), // flushes the batchers
			t.mp.Shutdown(ctx), // the periodic readers export a last time
		)
	})
	return t, nil
}

// summary prints each trace as a tree of spans, then each metric's points.
// suffix is removed from lease names, so the output reads the same on a
// shared Redis.
func (t *telemetry) summary(out io.Writer, suffix string) {
	fmt.Fprintln(out, "\nSummary: traces")
	t.printTraces(out, suffix)
	fmt.Fprintln(out, "Summary: metrics")
	t.printMetrics(out)
}

// printTraces prints each trace as a tree: every span under its parent, in
// the order they started; a span whose parent was not recorded is a root.
func (t *telemetry) printTraces(out io.Writer, suffix string) {
	spans := t.spans.ended()
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	known := map[trace.SpanID]bool{}
	for _, s := range spans {
		known[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); s.Parent().IsValid() && known[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var print func(s sdktrace.ReadOnlySpan, depth int)
	print = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintln(out, spanLine(s, depth, suffix))
		for _, c := range children[s.SpanContext().SpanID()] {
			print(c, depth+1)
		}
	}
	for _, r := range roots {
		print(r, 0)
	}
}

// spanLine is a span's line in the tree, indented by depth: its name, kind
// and duration, the attributes the demo is about, its events and an error
// status.
func spanLine(s sdktrace.ReadOnlySpan, depth int, suffix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth+1), s.Name())
	if k := s.SpanKind(); k != trace.SpanKindInternal {
		fmt.Fprintf(&b, " (%s)", k)
	}
	fmt.Fprintf(&b, " %v", s.EndTime().Sub(s.StartTime()).Round(time.Millisecond))
	for _, kv := range s.Attributes() {
		if k := string(kv.Key); strings.HasPrefix(k, "tenure.") || k == "error.type" || k == "http.response.status_code" {
			v := kv.Value.String()
			if k == "tenure.lease.name" {
				v = strings.TrimSuffix(v, suffix)
			}
			fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "tenure.lease."), v)
		}
	}
	for _, ev := range s.Events() {
		fmt.Fprintf(&b, " event=%s", ev.Name)
	}
	if st := s.Status(); st.Code.String() == "Error" {
		fmt.Fprintf(&b, " status=Error(%s)", st.Description)
	}
	return b.String()
}

// printMetrics prints each metric collected at shutdown, with its points.
func (t *telemetry) printMetrics(out io.Writer) {
	for _, sm := range t.metrics.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Fprintf(out, "  %s (%s)\n", m.Name, m.Unit)
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(out, "    %s %d\n", attrs(p.Attributes), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(out, "    %s count=%d sum=%.3fs\n", attrs(p.Attributes), p.Count, p.Sum)
				}
			}
		}
	}
}

func attrs(set attribute.Set) string {
	if set.Len() == 0 {
		return "{}"
	}
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// spanCollector is a span processor that keeps the ended spans.
type spanCollector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (c *spanCollector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *spanCollector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, s)
}
func (c *spanCollector) Shutdown(context.Context) error   { return nil }
func (c *spanCollector) ForceFlush(context.Context) error { return nil }

func (c *spanCollector) ended() []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// lockedWriter serialises the writes of the narrator and the exporters.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
