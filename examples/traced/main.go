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
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/examples/internal/exampleredis"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tracing"
)

const (
	ttl        = time.Second            // renewed every 333ms
	takeOverAt = 400 * time.Millisecond // when the operator takes "doomed" over
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "traced:", err)
		os.Exit(1)
	}
}

// run is the whole demo: the narrative, the exporters' output and the
// summary go to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) (err error) {
	start := time.Now()
	out = &lockedWriter{w: out}
	say := newNarrator(out, start)
	r, err := exampleredis.Connect(ctx, say)
	if err != nil {
		return err
	}
	defer r.Close()
	client, suffix := r.NewClient(), r.Suffix

	tel, err := newTelemetry(ctx, out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tel.shutdown()) }() // for early returns; a second shutdown is a no-op
	if tel.otlp {
		say("telemetry: stdout exporters, and OTLP/HTTP to %s", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	} else {
		say("telemetry: stdout exporters (set OTEL_EXPORTER_OTLP_ENDPOINT to send OTLP/HTTP too)")
	}

	inst, err := tracing.New(tracing.WithTracerProvider(tel.tp), tracing.WithMeterProvider(tel.mp))
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := lease.New(client, lease.WithTTL(ttl), lease.WithLogger(logger), lease.WithHooks(inst.Hooks()))
	if err != nil {
		return err
	}
	defer m.Close() // a second Close is a no-op

	tracer := tel.tp.Tracer("github.com/tenure-go/tenure/examples/traced")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newService(m, tracer, suffix, say), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	say("service listening on %s", base)
	c := &caller{base: base, tracer: tracer, say: say}

	c.get(ctx, "/jobs/report?ms=200")

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.get(ctx, "/jobs/shared?ms=300") })
	}
	wg.Wait()

	key := keys.Layout{Prefix: lease.DefaultKeyPrefix}.Lease("doomed" + suffix)
	takeOver := time.AfterFunc(takeOverAt, func() {
		if err := client.Set(context.WithoutCancel(ctx), key, "another-worker", 5*time.Second).Err(); err != nil {
			say("operator: the take-over failed: %v", err)
			return
		}
		say("operator: SET %s to another worker's token", key)
	})
	c.get(ctx, "/jobs/doomed?ms=3000")
	takeOver.Stop()
	if suffix != "" { // a shared server: remove this run's keys
		client.Del(context.WithoutCancel(ctx), key)
	}

	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
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
	tel.summary(out, suffix)
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// newService returns the HTTP handler: GET /jobs/{name}?ms=N runs a job of
// N milliseconds under a lease on name.
func newService(m *lease.Manager, tracer trace.Tracer, suffix string, say func(string, ...any)) http.Handler {
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
			if err := sleep(ctx, job); err != nil {
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

// serverSpans starts a Server span for each request, continuing the
// caller's trace from the traceparent header. (A real service would use
// the contrib package otelhttp; this keeps the example's dependencies to
// the OpenTelemetry API and SDK.)
func serverSpans(next http.Handler, tracer trace.Tracer) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method+" /jobs/{name}", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute("/jobs/{name}"), semconv.URLPath(r.URL.Path)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(semconv.HTTPResponseStatusCode(rec.status))
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// caller makes traced requests to the service.
type caller struct {
	base   string
	tracer trace.Tracer
	say    func(string, ...any)
	mu     sync.Mutex
	failed int
}

func (c *caller) get(ctx context.Context, path string) {
	ctx, span := c.tracer.Start(ctx, "GET /jobs/{name}", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String("GET"), semconv.URLFull(c.base+path)))
	defer span.End()
	body, status, err := c.do(ctx, path)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.say("client: GET %s: %v", path, err)
		c.mu.Lock()
		c.failed++
		c.mu.Unlock()
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	c.say("client: GET %s -> %d %s", path, status, strings.TrimSpace(body))
}

func (c *caller) do(ctx context.Context, path string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return "", 0, err
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode, err
}

// sleep stands for work taking d; it stops when ctx is done and returns
// the cause.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// newNarrator returns a printf for the narrative, safe for concurrent use,
// each line stamped with the time since start.
func newNarrator(w io.Writer, start time.Time) func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%5.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}
