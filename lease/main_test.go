package lease_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/lease"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// allowance is the scheduling slack granted to "no later than" checks: the
// time between a timer firing and its goroutine running, under -race on a
// loaded two-core machine.
const allowance = 100 * time.Millisecond

var quiet = slog.New(slog.DiscardHandler)

func newManager(t testing.TB, c redis.UniversalClient, opts ...lease.Option) *lease.Manager {
	t.Helper()
	m, err := lease.New(c, append([]lease.Option{lease.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// endedAt records when ctx was cancelled.
func endedAt(ctx context.Context) func() (time.Time, bool) {
	var mu sync.Mutex
	var at time.Time
	context.AfterFunc(ctx, func() {
		mu.Lock()
		at = time.Now()
		mu.Unlock()
	})
	return func() (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		return at, !at.IsZero()
	}
}

func waitDone(t *testing.T, l *lease.Lease, within time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("lease %q still live after %v", l.Name(), within)
	}
}
