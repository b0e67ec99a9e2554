package lease_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

var overload = flag.Bool("overload", false, "run TestOverloadHeldLeasesComeFirst: about a minute of load through a slowed proxy")

// When the server cannot keep up, held leases come first. A manager holds
// 14,000 leases (TTL 3s, renewed every second) through a proxy that then
// makes every round trip take 200ms: its watchdog (4 batches of 1,000 in
// flight) can renew about 20,000 a second. 64 acquirers keep asking for new
// names, about 300 a second through the same link, for 30 s. Once renewals
// run late (Watchdog.Behind), new leases are refused with ErrOverloaded;
// the test counts held leases lost against acquisitions granted and
// refused, logs them, and fails if no acquire was refused or a lease held
// before the slowdown was lost.
//
// What it shows and what it does not (bench/results/overload.md): with the
// brake off the same run loses nothing either, so it shows the brake
// refusing, not saving a lease; the watchdog's patience with slow answers
// is what keeps leases at 240ms round trips, brake or not.
func TestOverloadHeldLeasesComeFirst(t *testing.T) {
	if !*overload {
		t.Skip("a minute of load through a slowed proxy: run with -overload")
	}
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), PoolSize: 128, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m := newManager(t, c, lease.WithTTL(3*time.Second))
	ctx := context.Background()

	const held, acquirers = 14000, 64
	var lostHeld atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < held; i = next.Add(1) - 1 {
				l, err := m.TryAcquire(ctx, fmt.Sprint("held-", i))
				if err != nil {
					t.Errorf("acquiring the held leases: %v", err)
					return
				}
				context.AfterFunc(l.Context(), func() {
					if errors.Is(context.Cause(l.Context()), lease.ErrLost) {
						lostHeld.Add(1)
					}
				})
			}
		})
	}
	wg.Wait()

	proxy.SetLatency(100 * time.Millisecond)
	var granted, refused, lostNew atomic.Int64
	stop := time.Now().Add(30 * time.Second)
	next.Store(0)
	for range acquirers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				l, err := m.TryAcquire(ctx, fmt.Sprint("new-", next.Add(1)))
				switch {
				case errors.Is(err, lease.ErrOverloaded):
					refused.Add(1)
					time.Sleep(100 * time.Millisecond)
				case err != nil:
					t.Errorf("a new acquire: %v", err)
					return
				default:
					granted.Add(1)
					context.AfterFunc(l.Context(), func() {
						if errors.Is(context.Cause(l.Context()), lease.ErrLost) {
							lostNew.Add(1)
						}
					})
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(5 * time.Second) // what the last acquisitions added is renewed, or lost
	t.Logf("held before the slowdown: %d, lost %d; new: %d granted (%d of them lost), %d refused (ErrOverloaded)",
		held, lostHeld.Load(), granted.Load(), lostNew.Load(), refused.Load())
	proxy.SetLatency(0)
	if refused.Load() == 0 {
		t.Error("no acquire was refused: the load never reached what the link carries")
	}
	if n := lostHeld.Load(); n > 0 {
		t.Errorf("%d of the %d leases held before the slowdown were lost", n, held)
	}
}

// L2 when the process itself is short of CPU (run with -overload, best
// under -race beside another test run): a manager takes as many of
// 100,000 leases at TTL 2s as it will, then 64 goroutines ask for fresh
// names with TryAcquire, pausing 1ms after each refusal, for 12s. No lease
// held may be lost: before any is at risk, new ones must be refused. The
// brake used to act only once a lease was half-way from due to lost, and
// this run lost 16% and 46% of the held leases in two of three runs while
// thousands of new ones were granted.
func TestOverloadShortOfCPU(t *testing.T) {
	if !*overload {
		t.Skip("a minute of load: run with -overload")
	}
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 128, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	var logs syncBuffer
	m := newManager(t, c, lease.WithTTL(2*time.Second), lease.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer func() {
		if t.Failed() {
			t.Logf("the manager's log:\n%s", logs.String())
		}
	}()
	ctx := context.Background()
	var lost, granted, refused atomic.Int64
	var lostOnce sync.Once
	watch := func(l *lease.Lease) {
		taken := time.Now()
		context.AfterFunc(l.Context(), func() {
			if cause := context.Cause(l.Context()); errors.Is(cause, lease.ErrLost) {
				lost.Add(1)
				lostOnce.Do(func() { t.Logf("first lost: %s, taken %v before: %v", l.Name(), time.Since(taken), cause) })
			}
		})
	}
	var next, beforeRefusal atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= 100000; i = next.Add(1) {
				l, err := m.TryAcquire(ctx, fmt.Sprint("held-", i))
				switch {
				case errors.Is(err, lease.ErrNotAcquired): // overloaded, or answered too late
					if refused.Add(1) == 1 {
						beforeRefusal.Store(granted.Load())
					}
				case err != nil:
					t.Errorf("filling: %v", err)
					return
				default:
					granted.Add(1)
					watch(l)
				}
			}
		})
	}
	wg.Wait()
	held := granted.Load()
	t.Logf("filled: %d held, %d refused, %d lost; %d held at the first refusal", held, refused.Load(), lost.Load(), beforeRefusal.Load())
	granted.Store(0)
	refused.Store(0)
	stop := time.Now().Add(12 * time.Second)
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				l, err := m.TryAcquire(ctx, fmt.Sprint("new-", next.Add(1)))
				switch {
				case errors.Is(err, lease.ErrNotAcquired):
					refused.Add(1)
					time.Sleep(time.Millisecond)
				case err != nil:
					t.Errorf("a new acquire: %v", err)
					return
				default:
					granted.Add(1)
					watch(l)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(4 * time.Second) // what the last ones added is renewed, or lost
	t.Logf("then: %d granted, %d refused; lost %d of %d leases", granted.Load(), refused.Load(), lost.Load(), held+granted.Load())
	if n := lost.Load(); n > 0 {
		t.Errorf("%d leases lost while new ones were granted", n)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
