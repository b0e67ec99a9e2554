package tracing_test

import (
	"context"
	"log/slog"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
	"github.com/tenure-go/tenure/tracing"
)

// The leadership gauge is 1 while the observed election leads in this
// process, 0 before and after, and names the election.
func TestLeaderGauge(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	inst, err := tracing.New(tracing.WithMeterProvider(mp), tracing.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := lease.New(client, lease.WithLogger(slog.New(slog.DiscardHandler)), lease.WithHooks(inst.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := election.New(election.Config{Manager: m, Client: client, Name: "cron", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := inst.ObserveElection(e)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{reader: reader}
	gauge := func() int64 {
		t.Helper()
		return points(t, r.metrics(t), tracing.MetricLeader, tracing.KeyElectionName.String("cron"))
	}
	if g := gauge(); g != 0 {
		t.Fatalf("gauge before the campaign = %d, want 0", g)
	}
	inside := make(chan int64, 1)
	err = e.Run(context.Background(), election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			inside <- gauge()
			_ = e.Resign(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := <-inside; g != 1 {
		t.Errorf("gauge while leading = %d, want 1", g)
	}
	if g := gauge(); g != 0 {
		t.Errorf("gauge after resigning = %d, want 0", g)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
}
