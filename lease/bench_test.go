package lease_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// BenchmarkAcquireRelease measures an uncontended acquire and release of
// distinct names, and reports the round trips each cycle costs (the target
// is two: one per acquire, one per release).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			srv := redistest.Start(b)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: par + 4, ContextTimeoutEnabled: true})
			b.Cleanup(func() { _ = c.Close() })
			hook := &countingHook{}
			c.AddHook(hook)
			m := newManager(b, c)
			ctx := context.Background()
			// Load the scripts so that the measured loop sees the steady state.
			if l, err := m.Acquire(ctx, "warm-up"); err != nil {
				b.Fatal(err)
			} else if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			hook.n.Store(0)
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			runParallel(b, par, b.N, func() {
				name := fmt.Sprint("bench-", seq.Add(1))
				l, err := m.Acquire(ctx, name)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
		})
	}
}

// runParallel calls f n times from par goroutines.
func runParallel(b *testing.B, par, n int, f func()) {
	if par == 1 {
		for range n {
			f()
		}
		return
	}
	var next atomic.Int64
	done := make(chan struct{})
	for range par {
		go func() {
			defer func() { done <- struct{}{} }()
			for next.Add(1) <= int64(n) {
				f()
			}
		}()
	}
	for range par {
		<-done
	}
}

// BenchmarkRenewRound times one renewal round of 10,000 held leases through
// the Redis backend, as the watchdog sends it: batches of 1000 in one
// pipeline each.
func BenchmarkRenewRound(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	hook := &countingHook{}
	c.AddHook(hook)
	be := backend.NewRedis(c, lease.DefaultKeyPrefix)
	ctx := context.Background()
	const n, batch = 10_000, 1000
	items := make([]backend.Item, n)
	for i := range items {
		items[i] = backend.Item{Name: fmt.Sprint("renew-", i), Token: fmt.Sprint("token-", i), TTL: time.Minute}
		if res, err := be.Acquire(ctx, backend.Request{Name: items[i].Name, Token: items[i].Token, TTL: time.Minute}); err != nil || !res.Acquired {
			b.Fatal(err, res)
		}
	}
	errs := make([]error, n)
	pipelines := atomic.Int64{}
	c.AddHook(pipelineCounter{&pipelines})
	pipelines.Store(0)
	b.ResetTimer()
	for range b.N {
		for i := 0; i < n; i += batch {
			be.Renew(ctx, items[i:i+batch], errs[i:i+batch])
		}
	}
	b.StopTimer()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("lease %d: %v", i, err)
		}
	}
	b.ReportMetric(float64(pipelines.Load())/float64(b.N), "roundtrips/round")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/renewal")
}

// BenchmarkHold holds 10,000 and 100,000 leases under one manager (TTL 3s,
// renewed every second: 100,000 renewals a second at the top) and reports what
// holding costs: heap bytes per lease, goroutines added (a constant), and
// renewal round trips per round (leases acquired at different moments renew
// in a few groups per interval, each group in batches of 1000). Each
// iteration is three renewal intervals.
func BenchmarkHold(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) { benchmarkHold(b, n) })
	}
}

func benchmarkHold(b *testing.B, n int) {
	srv := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 40, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	pipelines := atomic.Int64{}
	c.AddHook(pipelineCounter{&pipelines})
	const rounds = 3
	ttl, interval := 3*time.Second, time.Second
	ctx := context.Background()

	// Open the pool's connections first: their buffers are not the leases'.
	runParallel(b, 32, 32, func() { _ = c.Ping(ctx).Err() })
	leases := make([]*lease.Lease, n)
	heapBefore, gBefore := heapInUse(), runtime.NumGoroutine()
	m := newManager(b, c, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	var seq atomic.Int64
	runParallel(b, 32, n, func() {
		i := seq.Add(1) - 1
		l, err := m.TryAcquire(ctx, fmt.Sprint("hold-", i))
		if err != nil {
			b.Error(err)
			return
		}
		leases[i] = l
	})
	heapAfter, gAfter := heapInUse(), runtime.NumGoroutine()

	time.Sleep(interval) // the first renewals
	pipelines.Store(0)
	b.ResetTimer()
	for range b.N {
		time.Sleep(rounds * interval)
	}
	b.StopTimer()
	lost := 0
	for _, l := range leases {
		if l.Err() != nil {
			lost++
		}
	}
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(heapAfter-heapBefore)/float64(n), "heapB/lease")
	b.ReportMetric(float64(gAfter-gBefore), "goroutines")
	b.ReportMetric(float64(pipelines.Load())/float64(rounds*b.N), "roundtrips/round")
	runtime.KeepAlive(leases)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// pipelineCounter counts pipelines: one round trip each on one server.
type pipelineCounter struct{ n *atomic.Int64 }

func (h pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// BenchmarkBaselineCycle is the floor for BenchmarkAcquireRelease: the two
// round trips any lease needs, issued directly (SET NX PX, then a
// compare-and-delete script), with no fence, watchdog or context.
func BenchmarkBaselineCycle(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			srv := redistest.Start(b)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: par + 4, ContextTimeoutEnabled: true})
			b.Cleanup(func() { _ = c.Close() })
			del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
			ctx := context.Background()
			if err := del.Run(ctx, c, []string{"warm-up"}, "x").Err(); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			runParallel(b, par, b.N, func() {
				key := fmt.Sprint("tenure:{bench-", seq.Add(1), "}")
				token := "0123456789abcdef0123456789abcdef"
				if ok, err := c.SetNX(ctx, key, token, 30*time.Second).Result(); err != nil || !ok {
					b.Error("set:", ok, err)
					return
				}
				if err := del.Run(ctx, c, []string{key}, token).Err(); err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// BenchmarkHandoff measures what a waiter feels on a contended name: 8
// goroutines over two managers (two connection pools) take one name in
// turn, holding it for no time. An op is one acquisition. It reports the
// release-to-acquire latency of handoffs to another goroutine (p50, p99,
// max), the share of acquisitions that were handoffs, and the round trips
// per acquisition. Run it with WithFair too: fairness costs round trips,
// barging lets a releaser take the name again.
func BenchmarkHandoff(b *testing.B) {
	for _, fair := range []bool{false, true} {
		b.Run(fmt.Sprintf("waiters=8/fair=%v", fair), func(b *testing.B) {
			srv := redistest.Start(b)
			hook := &countingHook{}
			var managers [2]*lease.Manager
			for i := range managers {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 8, ContextTimeoutEnabled: true})
				b.Cleanup(func() { _ = c.Close() })
				c.AddHook(hook)
				managers[i] = newManager(b, c, lease.WithFair(fair))
			}
			ctx := context.Background()
			const waiters = 8
			var (
				left      atomic.Int64
				lastEnd   atomic.Int64 // when the last holder released, ns since start
				lastOwner atomic.Int64
				mu        = make(chan struct{}, 1)
				latencies []time.Duration
				handoffs  int
			)
			left.Store(int64(b.N))
			lastOwner.Store(-1)
			start := time.Now()
			hook.n.Store(0)
			b.ResetTimer()
			done := make(chan struct{})
			for w := range waiters {
				go func() {
					defer func() { done <- struct{}{} }()
					for left.Add(-1) >= 0 {
						l, err := managers[w%2].Acquire(ctx, "hot")
						if err != nil {
							b.Error(err)
							return
						}
						got := time.Since(start)
						mu <- struct{}{}
						if prev := lastOwner.Swap(int64(w)); prev >= 0 && prev != int64(w) {
							handoffs++
							latencies = append(latencies, got-time.Duration(lastEnd.Load()))
						}
						<-mu
						lastEnd.Store(int64(time.Since(start)))
						if err := l.Release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			for range waiters {
				<-done
			}
			b.StopTimer()
			b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(handoffs)/float64(b.N), "handoff-share")
			if len(latencies) > 0 {
				slices.Sort(latencies)
				q := func(p float64) float64 {
					return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
				}
				b.ReportMetric(q(0.5), "p50-handoff-µs")
				b.ReportMetric(q(0.99), "p99-handoff-µs")
				b.ReportMetric(q(1), "max-handoff-µs")
			}
		})
	}
}
