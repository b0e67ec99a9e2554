package redisson_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

// BenchmarkHeldLocks holds b.N locks of distinct names at once from one
// Client and reports what each costs, its channel's subscription
// included: server connections and memory, client heap and goroutines.
// Run it with a fixed count: -bench HeldLocks -benchtime 1000x.
func BenchmarkHeldLocks(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	b.Cleanup(func() { _ = c.Close() })
	cl, err := redisson.New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Close() })
	holds := make([]*redisson.Hold, 0, b.N)
	before := sample(ctx, b, c)
	b.ResetTimer()
	for i := range b.N {
		h, err := cl.GetLock("cost-" + strconv.Itoa(i) + "-" + uuid()).Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		holds = append(holds, h)
	}
	b.StopTimer()
	// Each holder's subscription is confirmed asynchronously: wait for
	// every connection.
	deadline := time.Now().Add(time.Minute)
	for info(ctx, b, c, "connected_clients") < before.conns+int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := sample(ctx, b, c)
	n := float64(b.N)
	b.ReportMetric(float64(after.conns-before.conns)/n, "conns/hold")
	b.ReportMetric(float64(after.mem-before.mem)/n, "server-B/hold")
	b.ReportMetric(float64(after.heap-before.heap)/n, "client-B/hold")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/hold")
	for _, h := range holds {
		_ = h.Unlock(ctx)
	}
}

type costs struct{ conns, mem, heap, goroutines int64 }

func sample(ctx context.Context, b *testing.B, c *redis.Client) costs {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return costs{
		conns:      info(ctx, b, c, "connected_clients"),
		mem:        info(ctx, b, c, "used_memory"),
		heap:       int64(m.HeapAlloc),
		goroutines: int64(runtime.NumGoroutine()),
	}
}

// info returns one integer field of the server's INFO.
func info(ctx context.Context, b *testing.B, c *redis.Client, field string) int64 {
	s, err := c.Info(ctx, "clients", "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatalf("no %s in INFO", field)
	return 0
}
