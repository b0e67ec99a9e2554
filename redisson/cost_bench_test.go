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
// Client, past the moment each holder listens to its lock's channel, and
// reports what each costs, its channel's subscription included: server
// connections and memory, the pub/sub connections and what the server
// says they take (CLIENT LIST's tot-mem), client heap and goroutines;
// the server's again 5s later, once it has shrunk idle connections.
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
	// Each holder subscribes once it has lived a while, asynchronously:
	// wait for every channel.
	deadline := time.Now().Add(2 * time.Minute)
	for info(ctx, b, c, "pubsub_channels") < before.channels+int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := sample(ctx, b, c)
	n := float64(b.N)
	b.ReportMetric(float64(after.channels-before.channels)/n, "channels/hold")
	b.ReportMetric(float64(after.conns-before.conns)/n, "conns/hold")
	b.ReportMetric(float64(after.pubsubConns-before.pubsubConns), "pubsub-conns")
	b.ReportMetric(float64(after.pubsubMem-before.pubsubMem)/n, "pubsub-conn-B/hold")
	b.ReportMetric(float64(after.mem-before.mem)/n, "server-B/hold")
	b.ReportMetric(float64(after.heap-before.heap)/n, "client-B/hold")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/hold")
	// A connection's buffers are the server's to shrink once it is idle
	// (clientsCron, after 2s): what a Client holding locks for long costs.
	time.Sleep(5 * time.Second)
	settled := sample(ctx, b, c)
	b.ReportMetric(float64(settled.pubsubMem-before.pubsubMem)/n, "idle-pubsub-conn-B/hold")
	b.ReportMetric(float64(settled.mem-before.mem)/n, "idle-server-B/hold")
	for _, h := range holds {
		_ = h.Unlock(ctx)
	}
}

type costs struct {
	conns, mem, channels, pubsubConns, pubsubMem, heap, goroutines int64
}

func sample(ctx context.Context, b *testing.B, c *redis.Client) costs {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	conns, mem := pubsubConns(ctx, b, c)
	return costs{
		conns:       info(ctx, b, c, "connected_clients"),
		mem:         info(ctx, b, c, "used_memory"),
		channels:    info(ctx, b, c, "pubsub_channels"),
		pubsubConns: conns,
		pubsubMem:   mem,
		heap:        int64(m.HeapAlloc),
		goroutines:  int64(runtime.NumGoroutine()),
	}
}

// pubsubConns returns how many pub/sub connections the server has, and
// the memory it says they take (tot-mem: buffers and subscriptions).
func pubsubConns(ctx context.Context, b *testing.B, c *redis.Client) (n, mem int64) {
	list, err := c.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "tot-mem="); ok {
				m, _ := strconv.ParseInt(v, 10, 64)
				n, mem = n+1, mem+m
			}
		}
	}
	return n, mem
}

// info returns one integer field of the server's INFO.
func info(ctx context.Context, b *testing.B, c *redis.Client, field string) int64 {
	s, err := c.Info(ctx, "clients", "memory", "stats").Result()
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

// BenchmarkSubscribedChannel subscribes b.N lock channels on one pub/sub
// connection, as a Client's shared connection holds them, and reports the
// server memory each takes once the connection is idle: what a held
// lock's listening costs the server beside its hash. Run it with a fixed
// count: -bench SubscribedChannel -benchtime 10000x.
func BenchmarkSubscribedChannel(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	b.Cleanup(func() { _ = c.Close() })
	before := info(ctx, b, c, "used_memory")
	ps := c.Subscribe(ctx)
	defer func() { _ = ps.Close() }()
	channels := make([]string, 0, 500)
	b.ResetTimer()
	for i := range b.N {
		channels = append(channels, "redisson_lock__channel:{cost-"+strconv.Itoa(i)+"-"+uuid()+"}")
		if len(channels) == cap(channels) || i == b.N-1 {
			if err := ps.Subscribe(ctx, channels...); err != nil {
				b.Fatal(err)
			}
			channels = channels[:0]
		}
	}
	b.StopTimer()
	for info(ctx, b, c, "pubsub_channels") < int64(b.N) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // the connection idle: its buffers shrunk
	b.ReportMetric(float64(info(ctx, b, c, "used_memory")-before)/float64(b.N), "idle-server-B/channel")
}
