package main

// How the scenarios measure, shared by them: clients with hooks that count
// what they send, Redis's own accounting (INFO cpu, INFO commandstats), the
// process's CPU and memory, and the loops that drive lockers.

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// counter is a go-redis hook that counts commands and round trips (a
// pipeline is one round trip).
type counter struct {
	cmds, trips atomic.Int64
}

func (h *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

func (h *counter) reset() { h.cmds.Store(0); h.trips.Store(0) }

// counters maps each client newClient made to its counting hook, so that
// an implementation that needs a client of its own options (redisson's,
// which must not resend) can count on it too.
var counters sync.Map

// newClient returns a client of addr with a counting hook and pool of the
// given size, its connections already open. It keeps go-redis's default
// retries, as the peers' users do: on a loaded machine a read that timed
// out is sent again, where without retries it fails the run.
func newClient(addr string, pool int) (*redis.Client, *counter) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool, MinIdleConns: 0, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second})
	h := &counter{}
	c.AddHook(h)
	counters.Store(c, h)
	warm(c, pool)
	h.reset()
	return c, h
}

// warm opens n connections of c's pool.
func warm(c *redis.Client, n int) {
	done := make(chan struct{})
	for range n {
		go func() {
			_ = c.Ping(context.Background()).Err()
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
}

// acquirers is how many goroutines acquire the leases a scenario holds
// (3, 5 and 8).
const acquirers = 64

// memInUse is the heap and goroutine stacks in use after garbage
// collection: compared before and after, what held leases cost the process.
func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// cpuTime is this process's user + system CPU time (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the server's used_cpu_user + used_cpu_sys.
func redisCPU(ctx context.Context, admin *redis.Client) float64 {
	s, err := admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var t float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			t += f
		}
	}
	return t
}

// parallel calls f(i) for i in [0, n) from k goroutines; the first error
// wins.
func parallel(n, k int, f func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// lateness tracks, per lease, the send time of its last renewal as some
// sampler sees it, and the worst delay of a renewal past its schedule
// (previous send + interval).
type lateness struct {
	interval time.Duration
	last     []time.Time
	worst    time.Duration
	renewals int64
}

func newLateness(n int, interval time.Duration, start []time.Time) *lateness {
	return &lateness{interval: interval, last: start, worst: -interval}
}

func (l *lateness) observe(i int, sent time.Time) {
	if !sent.After(l.last[i]) {
		return
	}
	l.worst = max(l.worst, sent.Sub(l.last[i])-l.interval)
	l.last[i] = sent
	l.renewals++
}

// timedCycles runs acquire+release of l from par goroutines for d (or, if
// d is 0, count cycles in all), goroutine g's next cycle on name(g). It
// returns every cycle's latency, how many failed, and the seconds it took.
func timedCycles(ctx context.Context, l locker, par int, d time.Duration, count int64, name func(g int) string) ([]time.Duration, int64, float64) {
	var (
		ops, errs atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		lats      []time.Duration
	)
	start := time.Now()
	stop := start.Add(d)
	for g := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for {
				if d > 0 && time.Now().After(stop) {
					break
				}
				if d == 0 && ops.Add(1) > count {
					break
				}
				key := name(g)
				t0 := time.Now()
				rel, err := l.acquire(ctx, key)
				if err == nil {
					err = rel(ctx)
				}
				local = append(local, time.Since(t0))
				if err != nil {
					errs.Add(1)
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lats, errs.Load(), time.Since(start).Seconds()
}

// nameHook counts the commands the client sends by name, to tell them
// from those scripts call.
type nameHook struct {
	mu    sync.Mutex
	names map[string]int64
}

func (h *nameHook) record(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = map[string]int64{}
	}
	for _, c := range cmds {
		h.names[strings.ToLower(c.Name())]++
	}
}

func (h *nameHook) reset() {
	h.mu.Lock()
	h.names = map[string]int64{}
	h.mu.Unlock()
}

// sent is how many commands named as commandstats names them the client
// sent.
func (h *nameHook) sent(name string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	base, _, _ := strings.Cut(name, "|") // commandstats spells subcommands "client|setinfo"
	return h.names[base]
}

func (h *nameHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *nameHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *nameHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.record(cmds...)
		return next(ctx, cmds)
	}
}

// cmdCount is one command's line of INFO commandstats.
type cmdCount struct{ calls, usec int64 }

// commandStats parses INFO commandstats: cmdstat_<name>:calls=..,usec=..,...
func commandStats(ctx context.Context, admin *redis.Client) (map[string]cmdCount, error) {
	s, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]cmdCount{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var cc cmdCount
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				cc.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				cc.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[name] = cc
	}
	return out, nil
}

// lockerPair builds a locker on each of two clients of addr, for g
// goroutines half on each (pools of g/2+2); done closes them, each locker
// before its client.
func lockerPair(addr string, g int, build func(*redis.Client) (locker, error)) (ls [2]locker, hooks [2]*counter, done func(), err error) {
	var closers []func()
	done = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for i := range ls {
		c, h := newClient(addr, g/2+2)
		closers = append(closers, func() { _ = c.Close() })
		l, err := build(c)
		if err != nil {
			done()
			return ls, hooks, func() {}, err
		}
		closers = append(closers, func() { _ = l.close() })
		ls[i], hooks[i] = l, h
	}
	return ls, hooks, done, nil
}

// startLoopbackServer starts a redis-server of the bench's own and refuses
// one that is not on loopback: the bench never measures another machine's
// server.
func startLoopbackServer() (*redistest.Server, error) {
	srv, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(srv.Addr(), "127.") {
		_ = srv.Stop()
		return nil, fmt.Errorf("refusing to benchmark a non-loopback server %s", srv.Addr())
	}
	return srv, nil
}
