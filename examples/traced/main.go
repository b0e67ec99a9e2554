// Command traced is an HTTP service whose handler runs a job under a lease
// (Manager.Do), traced and measured with OpenTelemetry through package
// tracing.
//
// It starts the service on a free loopback port, makes requests to itself
// and shuts down cleanly, flushing the providers:
//
//   - GET /jobs/report: a job under a lease on "report";
//   - two concurrent GET /jobs/shared: the second waits for the first's
//     lease and gets it as soon as it is released;
//   - GET /jobs/doomed: a long job whose lease an operator takes over
//     half-way; the watchdog notices at its next renewal, the job stops and
//     the handler answers 409 Conflict.
//
// The client's requests carry W3C trace context, so each request is one
// trace: client span, server span, then the lease's acquire span with the
// job's span (work under Lease.Context) and the hold span under it, and the
// release span under the server span.
//
// Run it from the repository root with
//
//	go run ./examples/traced
//
// Spans and metrics go to stdout through the stdout exporters, followed by
// a summary: each trace as a tree, and each metric's data points. With
// OTEL_EXPORTER_OTLP_ENDPOINT set (e.g. http://localhost:4318) they also go
// to that OTLP/HTTP endpoint (the exporters read the other OTEL_EXPORTER_OTLP_*
// variables too). With no REDIS_URL set it starts an embedded in-process
// Redis (miniredis); to use a real server instead:
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/traced
//
// (names then get a random suffix, so runs do not collide). It finishes by
// itself in about two seconds. The library's log, where the lease-lost
// warning appears, goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/examples/internal/exampleredis"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tracing"
)

const (
	ttl        = time.Second            // renewed every 333ms
	takeOverAt = 400 * time.Millisecond // when the operator takes "doomed" over
)

func main() { examplecmd.Main("traced", run) }

// run is the whole demo: the narrative, the exporters' output and the
// summary go to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) (err error) {
	start := time.Now()
	out = &lockedWriter{w: out}
	say := examplecmd.Narrator(out, start, 10*time.Millisecond)
	r, err := exampleredis.Connect(ctx, say)
	if err != nil {
		return err
	}
	defer r.Close()
	tel, err := newTelemetry(ctx, out, say) // telemetry.go: it says where spans and metrics go
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tel.shutdown()) }() // for early returns; a second shutdown is a no-op

	inst, err := tracing.New(tracing.WithTracerProvider(tel.tp), tracing.WithMeterProvider(tel.mp))
	if err != nil {
		return err
	}
	client := r.NewClient()
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := lease.New(client, lease.WithTTL(ttl), lease.WithLogger(logger), lease.WithHooks(inst.Hooks()))
	if err != nil {
		return err
	}
	defer m.Close() // a second Close is a no-op

	c, stopService, err := serve(newService(m, tel.tracer, r.Suffix, say), tel.tracer, say) // scenery.go
	if err != nil {
		return err
	}
	c.get(ctx, "/jobs/report?ms=200")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.get(ctx, "/jobs/shared?ms=300") })
	}
	wg.Wait()
	key := exampleredis.Keys.Lease("doomed" + r.Suffix)
	stopTakeOver := time.AfterFunc(takeOverAt, func() { takeOver(ctx, client, key, say) })
	c.get(ctx, "/jobs/doomed?ms=3000")
	stopTakeOver.Stop()
	r.Cleanup(ctx, key)

	if err := stopService(ctx); err != nil {
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}
	say("service shut down, manager closed; flushing the providers")
	if err := tel.shutdown(); err != nil {
		return err
	}
	if c.failed > 0 {
		return fmt.Errorf("%d requests failed", c.failed)
	}
	tel.summary(out, r.Suffix)
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// newService returns the HTTP handler: GET /jobs/{name}?ms=N runs a job of
// N milliseconds under a lease on name.
func newService(m *lease.Manager, tracer trace.Tracer, suffix string, say examplecmd.Say) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name") + suffix
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		job := time.Duration(ms) * time.Millisecond
		asked := time.Now()
		var waited time.Duration
		err := m.Do(r.Context(), name, func(ctx context.Context) error {
			waited = time.Since(asked)
			// ctx carries the lease's acquire span: this span is its child.
			ctx, span := tracer.Start(ctx, "job", trace.WithAttributes(attribute.Int64("job.ms", int64(ms))))
			defer span.End()
			if err := examplecmd.Work(ctx, job); err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "job interrupted")
				return err
			}
			return nil
		})
		switch {
		case errors.Is(err, lease.ErrLost):
			say("server: job on %q stopped: lease lost", name)
			http.Error(w, "lease lost: the job stopped early", http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			say("server: job on %q done (%v waiting for the lease)", name, waited.Round(time.Millisecond))
			fmt.Fprintf(w, "job on %q done\n", name)
		}
	})
	return serverSpans(mux, tracer)
}
