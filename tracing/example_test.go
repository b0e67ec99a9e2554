package tracing_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
	"github.com/tenure-go/tenure/tracing"
)

// redisAddr is the server the example uses; TestMain points it at a
// redis-server of its own.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// Instrument a Manager: its acquisitions, holds, renewals and releases
// become spans and metrics. A program sets its OpenTelemetry SDK as the
// global providers and calls tracing.New() with no options; the no-op
// providers here keep the example free of an SDK (tracing/test shows the
// spans themselves).
func ExampleNew() {
	inst, err := tracing.New(
		tracing.WithTracerProvider(tracenoop.NewTracerProvider()),
		tracing.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
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

	err = m.Do(context.Background(), "nightly-report", func(ctx context.Context) error {
		l, _ := lease.FromContext(ctx)
		fmt.Println("holding", l.Name())
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// holding nightly-report
	// done: <nil>
}
