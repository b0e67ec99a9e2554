package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// L1 on a real redis-server (docs/design.md, "Under stress"): Redis stopped
// (SIGSTOP) from before a lease's first renewal until shortly before its
// loss time, then answering at once, keeps the lease. TTL 6s: the renewal
// falls due at 2s, Redis is stopped from 1.8s to 5.4s, and the lease's
// loss time is about 5.89s, so the stalled renewal (and its second
// attempt) are answered with half a second to spare. The watchdog used to
// take the stall for the round trip and the lateness for overload, and
// lost the lease at its loss time with ErrBehind although Redis answered.
func TestPauseAnsweredInTimeKeepsTheLease(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m := newManager(t, c, lease.WithTTL(6*time.Second))
	ctx := context.Background()
	start := time.Now()
	l, err := m.TryAcquire(ctx, "paused")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(1800 * time.Millisecond)))
	srv.MustPause(t)
	time.Sleep(time.Until(start.Add(5400 * time.Millisecond)))
	srv.MustResume(t)
	if l.Deadline().Before(start.Add(6 * time.Second)) {
		// Not yet renewed: the answer is on its way. Wait for it, or for
		// the loss.
		deadline := l.Deadline()
		for l.Err() == nil && !l.Deadline().After(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Two more renewal intervals: the renewals after the stall.
	time.Sleep(4 * time.Second)
	if err := l.Err(); err != nil {
		t.Fatalf("lost although Redis answered the stalled renewal before the loss time: %v", context.Cause(l.Context()))
	}
	if got, err := c.Get(ctx, "tenure:{paused}").Result(); err != nil || got != l.Token() {
		t.Fatalf("the key holds %q (%v), want the lease's token", got, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A client built with go-redis's defaults (no ContextTimeoutEnabled) does
// not end a command when its context does: a renewal stalled on a stopped
// Redis runs for its ReadTimeout (3s). The lease is still lost at its
// deadline, as unanswered rather than overloaded, and Close returns
// before the stalled command does.
func TestDefaultClientAttemptEndsAtItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	var inflight atomic.Int64
	c.AddHook(inflightHook{&inflight})
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := m.TryAcquire(ctx, "default-client")
	if err != nil {
		t.Fatal(err)
	}
	srv.MustPause(t)
	<-l.Done()
	cause := context.Cause(l.Context())
	if !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("ended with %v, want ErrLost", cause)
	}
	if inflight.Load() == 0 {
		t.Fatal("no renewal still in go-redis at the loss: the test shows nothing")
	}
	if err := m.Close(); err != nil && !errors.Is(err, lease.ErrClosed) {
		t.Logf("Close: %v", err) // the release cannot reach a stopped Redis
	}
	if inflight.Load() == 0 {
		t.Fatal("the stalled renewal ended before Close returned: Close waited for it")
	}
	srv.MustResume(t)
	_ = c.Close() // ends what go-redis still runs, for goleak
	for inflight.Load() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
}

// inflightHook counts the commands and pipelines go-redis is running.
type inflightHook struct{ n *atomic.Int64 }

func (inflightHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h inflightHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		defer h.n.Add(-1)
		return next(ctx, cmd)
	}
}
func (h inflightHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		defer h.n.Add(-1)
		return next(ctx, cmds)
	}
}
