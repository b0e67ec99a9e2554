package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

type ctxKey struct{}

// hookLog records hook calls as lines, in order.
type hookLog struct {
	mu    sync.Mutex
	lines []string
	renew map[string]int // renewal outcomes by name
}

func (h *hookLog) add(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, fmt.Sprintf(format, args...))
}

func (h *hookLog) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

func (h *hookLog) hooks() lease.Hooks {
	return lease.Hooks{
		AcquireStart: func(ctx context.Context, name string) context.Context {
			h.add("acquire-start %s", name)
			return context.WithValue(ctx, ctxKey{}, "span:"+name)
		},
		AcquireDone: func(ctx context.Context, info lease.AcquireInfo) {
			fence := int64(0)
			if info.Lease != nil {
				fence = info.Lease.Fence()
			}
			h.add("acquire-done %s %v attempts>0=%v fence>0=%v err=%v", info.Name, ctx.Value(ctxKey{}), info.Attempts > 0, fence > 0, info.Err != nil)
		},
		Renewed: func(l *lease.Lease, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.renew == nil {
				h.renew = map[string]int{}
			}
			h.renew[fmt.Sprintf("%s ok=%v", l.Name(), err == nil)]++
		},
		ExtendStart: func(ctx context.Context, l *lease.Lease, ttl time.Duration) context.Context {
			h.add("extend-start %s %v", l.Name(), ttl)
			return ctx
		},
		ExtendDone: func(ctx context.Context, l *lease.Lease, err error) {
			h.add("extend-done %s err=%v", l.Name(), err)
		},
		ReleaseStart: func(ctx context.Context, l *lease.Lease) context.Context {
			h.add("release-start %s", l.Name())
			return ctx
		},
		ReleaseDone: func(ctx context.Context, l *lease.Lease, err error) {
			h.add("release-done %s notheld=%v", l.Name(), errors.Is(err, lease.ErrNotHeld))
		},
		Ended: func(l *lease.Lease, info lease.EndInfo) {
			h.add("ended %s %v %s held>0=%v", l.Name(), info.Cause, info.Loss, info.Held > 0)
		},
	}
}

func last(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

func TestHooksSeeAcquireRenewExtendReleaseAndLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	var h hookLog
	interval := 50 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(200*time.Millisecond), lease.WithRenewInterval(interval), lease.WithHooks(h.hooks()))
	ctx := context.Background()

	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Context().Value(ctxKey{}); got != "span:a" {
		t.Fatalf("lease context lost the value AcquireStart added: %v", got)
	}
	time.Sleep(4 * interval)
	if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, ""); err == nil {
		t.Fatal("empty name accepted")
	}

	lost, err := m.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "tenure:{b}", "intruder", time.Minute)
	waitDone(t, lost, interval+allowance+50*time.Millisecond)
	// Ended runs on the watchdog's goroutine just after the cancellation.
	for start := time.Now(); !strings.HasPrefix(last(h.snapshot()), "ended b"); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no Ended call for the lost lease: %q", h.snapshot())
		}
	}
	if err := lost.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of a lost lease = %v", err)
	}

	want := []string{
		"acquire-start a",
		"acquire-done a span:a attempts>0=true fence>0=true err=false",
		"extend-start a 300ms",
		"extend-done a err=<nil>",
		"release-start a",
		"ended a " + lease.ErrReleased.Error() + "  held>0=true",
		"release-done a notheld=false",
		"acquire-start ",
		"acquire-done  span: attempts>0=false fence>0=false err=true",
		"acquire-start b",
		"acquire-done b span:b attempts>0=true fence>0=true err=false",
		"ended b " + lease.ErrLost.Error() + " taken_over held>0=true",
		"release-start b",
		"release-done b notheld=true",
	}
	got := h.snapshot()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hook calls:\n%q\nwant\n%q", got, want)
	}
	h.mu.Lock()
	renewed := h.renew["a ok=true"]
	h.mu.Unlock()
	if renewed < 2 {
		t.Fatalf("renewals of a seen by the hook: %d, want at least 2 in %v", renewed, 4*interval)
	}
}

func TestFromContextGivesDoItsLease(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, ok := lease.FromContext(ctx); ok {
		t.Fatal("a lease in a plain context")
	}
	err := m.Do(ctx, "job", func(ctx context.Context) error {
		l, ok := lease.FromContext(ctx)
		if !ok || l.Name() != "job" || l.Fence() <= 0 || l.Err() != nil {
			return fmt.Errorf("FromContext = %v, %v", l, ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A loss says why: the key deleted, the name held by another, or no renewal
// confirmed before the deadline (a paused server).
func TestLossReasons(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	var (
		mu      sync.Mutex
		reasons = map[string]lease.LossReason{}
	)
	hooks := lease.Hooks{Ended: func(l *lease.Lease, info lease.EndInfo) {
		mu.Lock()
		reasons[l.Name()] = info.Loss
		mu.Unlock()
	}}
	interval := 50 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(300*time.Millisecond), lease.WithRenewInterval(interval), lease.WithHooks(hooks))
	reason := func(name string) lease.LossReason {
		t.Helper()
		for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(time.Millisecond) {
			mu.Lock()
			r, ok := reasons[name]
			mu.Unlock()
			if ok {
				return r
			}
		}
		t.Fatalf("%s: no Ended call", name)
		return ""
	}

	deleted, err := m.Acquire(ctx, "deleted")
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenure:{deleted}")
	waitDone(t, deleted, 5*time.Second)
	if r := reason("deleted"); r != lease.LossDeleted {
		t.Fatalf("key deleted: loss %q, want %q", r, lease.LossDeleted)
	}

	taken, err := m.Acquire(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "tenure:{taken}", "another-holder", time.Minute)
	waitDone(t, taken, 5*time.Second)
	if r := reason("taken"); r != lease.LossTakenOver {
		t.Fatalf("taken over: loss %q, want %q", r, lease.LossTakenOver)
	}

	// Extend reports the same word as a renewal.
	ext, err := m.Acquire(ctx, "extend", lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenure:{extend}")
	if err := ext.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Extend of a deleted lease: %v", err)
	}
	if r := reason("extend"); r != lease.LossDeleted {
		t.Fatalf("Extend found the key deleted: loss %q, want %q", r, lease.LossDeleted)
	}

	expired, err := m.Acquire(ctx, "expired")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, expired, 5*time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if r := reason("expired"); r != lease.LossExpired {
		t.Fatalf("server paused: loss %q, want %q", r, lease.LossExpired)
	}
}
