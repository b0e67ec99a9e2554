package tracing_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tracing"
)

// Instrument a Manager, and trace work done under a lease as a child of
// the span of its acquisition. A program would usually set the global
// providers (otel.SetTracerProvider, otel.SetMeterProvider) and call
// tracing.New() with no options; here spans go to an in-memory recorder.
func ExampleNew() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	inst, err := tracing.New(tracing.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client, lease.WithHooks(inst.Hooks()))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	err = m.Do(ctx, "nightly-report", func(ctx context.Context) error {
		_, work := tp.Tracer("example").Start(ctx, "write report")
		defer work.End()
		return nil
	})
	if err != nil {
		panic(err)
	}

	names := map[[8]byte]string{}
	for _, s := range spans.Ended() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	for _, s := range spans.Ended() {
		parent := names[s.Parent().SpanID()]
		if parent == "" {
			parent = "-"
		}
		fmt.Printf("%s (parent %s)\n", s.Name(), parent)
	}
	// Output:
	// tenure.lease.acquire (parent -)
	// write report (parent tenure.lease.acquire)
	// tenure.lease.hold (parent tenure.lease.acquire)
	// tenure.lease.release (parent -)
}
