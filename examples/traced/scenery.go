package main

// The demo's scenery: the HTTP server and its client, each making their
// spans as otelhttp would, and the operator who takes a name over. main.go
// is what the demo is about; telemetry.go sets up OpenTelemetry.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
)

// serve starts handler on a free loopback port. It returns a caller of it,
// whose requests start their traces with tracer, and a func that shuts the
// server down, even once ctx is cancelled.
func serve(handler http.Handler, tracer trace.Tracer, say examplecmd.Say) (_ *caller, stop func(ctx context.Context) error, _ error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	say("service listening on %s", base)
	stop = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			return err
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return &caller{base: base, tracer: tracer, say: say}, stop, nil
}

// takeOver plays an operator who gives key to another worker.
func takeOver(ctx context.Context, client *redis.Client, key string, say examplecmd.Say) {
	if err := client.Set(context.WithoutCancel(ctx), key, "another-worker", 5*time.Second).Err(); err != nil {
		say("operator: the take-over failed: %v", err)
		return
	}
	say("operator: SET %s to another worker's token", key)
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
	say    examplecmd.Say
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
