package main

// -v's logger: records written to stderr from a queue of their own, so
// that a stderr nobody reads never holds up the lease's watchdog.

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// newLogger returns the logger of -v (level Info) and -vv (Debug: every
// renewal too), writing text to w from a goroutine of its own; without -v
// it discards everything. flush writes what is queued and stops the
// goroutine; records logged after it are dropped.
func newLogger(verbosity int, w io.Writer) (log *slog.Logger, flush func()) {
	if verbosity <= 0 {
		return slog.New(slog.DiscardHandler), func() {}
	}
	level := slog.LevelInfo
	if verbosity > 1 {
		level = slog.LevelDebug
	}
	q := &logQueue{ch: make(chan queued, 256), done: make(chan struct{})}
	go q.run()
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(&queueHandler{h: h, q: q}), q.close
}

// logQueue carries records to the goroutine that writes them. The lease's
// hooks log from its watchdog's goroutines, which must not block: they
// keep the lease's local deadline, and a stderr that nobody reads (a full
// pipe) must not hold them up. So a record is queued, and dropped (and
// counted) when the queue is full.
type logQueue struct {
	mu      sync.RWMutex
	closed  bool
	ch      chan queued
	done    chan struct{}
	dropped atomic.Int64
}

type queued struct {
	h slog.Handler
	r slog.Record
}

func (q *logQueue) put(h slog.Handler, r slog.Record) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return
	}
	select {
	case q.ch <- queued{h, r.Clone()}:
	default:
		q.dropped.Add(1)
	}
}

func (q *logQueue) run() {
	defer close(q.done)
	ctx := context.Background()
	for e := range q.ch {
		if n := q.dropped.Swap(0); n > 0 {
			r := slog.NewRecord(time.Now(), slog.LevelWarn, "log records dropped: stderr was not read fast enough", 0)
			r.AddAttrs(slog.Int64("dropped", n))
			_ = e.h.Handle(ctx, r)
		}
		_ = e.h.Handle(ctx, e.r)
	}
}

func (q *logQueue) close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	<-q.done
}

// queueHandler is a slog.Handler that hands its records to a logQueue.
type queueHandler struct {
	h slog.Handler
	q *logQueue
}

func (h *queueHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *queueHandler) Handle(_ context.Context, r slog.Record) error {
	h.q.put(h.h, r)
	return nil
}

func (h *queueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &queueHandler{h: h.h.WithAttrs(as), q: h.q}
}

func (h *queueHandler) WithGroup(name string) slog.Handler {
	return &queueHandler{h: h.h.WithGroup(name), q: h.q}
}
