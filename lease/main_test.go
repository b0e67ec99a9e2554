package lease_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// allowance is the scheduling slack in a wait's expected bound: the time
// between a timer firing and its goroutine running, under -race on a
// loaded two-core machine. Tests assert order and causes, not durations
// (timing is the benchmarks' and the chaos runner's): waitDone gives a wait
// far more than its expected bound before it fails.
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

// waitDone waits for l to end, expected within the given time; it fails
// only after several times that and 10 s more, so that a loaded machine's
// slowness fails no test.
func waitDone(t *testing.T, l *lease.Lease, within time.Duration) {
	t.Helper()
	bound := 3*within + 10*time.Second
	select {
	case <-l.Done():
	case <-time.After(bound):
		t.Fatalf("lease %q still live after %v (expected within %v)", l.Name(), bound, within)
	}
}
