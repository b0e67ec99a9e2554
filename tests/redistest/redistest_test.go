package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually retries f until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// This test changes the environment, so it must not run in parallel; Go runs
// it before resuming the parallel tests.
func TestBinary(t *testing.T) {
	if _, err := redistest.Binary(); err != nil {
		t.Fatalf("Binary() on this machine: %v", err)
	}

	t.Setenv("REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir())
	_, err := redistest.Binary()
	want := "redis-server not found: install Debian's package redis-server (apt-get install redis-server) or set REDIS_SERVER"
	if err == nil || err.Error() != want {
		t.Fatalf("Binary() without redis-server = %v, want %q", err, want)
	}
	if _, err := redistest.StartServer(redistest.Config{}); err == nil || err.Error() != want {
		t.Fatalf("StartServer without redis-server = %v, want %q", err, want)
	}

	t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
	if _, err := redistest.Binary(); err == nil || !strings.Contains(err.Error(), "/nonexistent/redis-server") {
		t.Fatalf("Binary() with bad REDIS_SERVER = %v", err)
	}
}

func TestStartPingStop(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.URL() != "redis://"+s.Addr() {
		t.Fatalf("Addr %q URL %q", s.Addr(), s.URL())
	}
	if err := s.Client(t).Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(s.URL())
	if err != nil || opt.Addr != s.Addr() {
		t.Fatalf("ParseURL(%q) = %v, %v", s.URL(), opt, err)
	}
	if !s.Running() || s.Paused() {
		t.Fatalf("Running %v Paused %v", s.Running(), s.Paused())
	}
	// Persistence is off unless asked for.
	save, err := s.Client(t).ConfigGet(ctxTimeout(t, 2*time.Second), "save").Result()
	if err != nil || save["save"] != "" {
		t.Fatalf("save = %v, %v", save, err)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Fatalf("dir %s still there: %v", s.Dir(), err)
	}
	if err := s.Restart(); !errors.Is(err, redistest.ErrStopped) {
		t.Fatalf("Restart after Stop = %v", err)
	}
	if err := s.Pause(); !errors.Is(err, redistest.ErrNotRunning) {
		t.Fatalf("Pause after Stop = %v", err)
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory", "1mb"}})
	got, err := s.Client(t).ConfigGet(ctxTimeout(t, 2*time.Second), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "1048576" {
		t.Fatalf("maxmemory = %v, %v", got, err)
	}
}

func TestStartErrorShowsLog(t *testing.T) {
	t.Parallel()
	s, err := redistest.StartServer(redistest.Config{Args: []string{"--no-such-directive", "1"}})
	if err == nil {
		_ = s.Stop()
		t.Fatal("StartServer with a bad argument succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks the server's complaint: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	s.MustPause(t)
	if !s.Paused() || !s.Running() {
		t.Fatalf("Paused %v Running %v", s.Paused(), s.Running())
	}
	start := time.Now()
	err := c.Ping(ctxTimeout(t, 300*time.Millisecond)).Err()
	if err == nil {
		t.Fatal("PING answered by a paused server")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("PING took %v despite a 300ms deadline", el)
	}
	s.MustResume(t)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprintf("AOF=%v", aof), func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.Config{AOF: aof})
			c := s.Client(t)
			port := s.Port()
			if err := c.Set(ctxTimeout(t, 2*time.Second), "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			oldPid := s.Pid()
			s.MustKill(t)
			if s.Running() {
				t.Fatal("running after Kill")
			}
			if err := s.Kill(); err != nil {
				t.Fatalf("second Kill: %v", err)
			}
			s.MustRestart(t)
			if s.Port() != port || s.Pid() == oldPid || !s.Running() {
				t.Fatalf("after Restart: port %d (was %d) pid %d (was %d) running %v", s.Port(), port, s.Pid(), oldPid, s.Running())
			}
			// The old client's connections died with the server; go-redis
			// may report that once before redialing.
			var got string
			eventually(t, 5*time.Second, func() error {
				var err error
				got, err = c.Get(ctxTimeout(t, time.Second), "k").Result()
				if errors.Is(err, redis.Nil) {
					got, err = "", nil
				}
				return err
			})
			want := ""
			if aof {
				want = "v"
			}
			if got != want {
				t.Fatalf("after restart GET k = %q, want %q", got, want)
			}
		})
	}
}

func TestRestartWhileRunningAndPaused(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{AOF: true})
	c := s.Client(t)
	if err := c.Set(ctxTimeout(t, 2*time.Second), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.MustPause(t)
	s.MustRestart(t) // kills the stopped process first
	if s.Paused() {
		t.Fatal("paused after Restart")
	}
	eventually(t, 5*time.Second, func() error {
		v, err := c.Get(ctxTimeout(t, time.Second), "k").Result()
		if err == nil && v != "v" {
			return fmt.Errorf("GET k = %q", v)
		}
		return err
	})
}

// Restart keeps the port even if something else holds it for a moment.
func TestRestartWaitsForPort(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.MustKill(t)
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, func() { _ = ln.Close() })
	s.MustRestart(t)
	if err := s.Client(t).Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.Addr() == s.Addr() {
		t.Fatalf("proxy addr %q", p.Addr())
	}
	c := proxied(t, p)
	ctx := ctxTimeout(t, 5*time.Second)
	if err := c.Set(ctx, "k", strings.Repeat("x", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := s.Client(t).Get(ctx, "k").Result()
	if err != nil || len(v) != 1<<20 {
		t.Fatalf("direct GET: len %d, %v", len(v), err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || len(v) != 1<<20 {
		t.Fatalf("proxied GET: len %d, %v", len(v), err)
	}
	if p.Conns() == 0 || p.Accepted() == 0 {
		t.Fatalf("Conns %d Accepted %d", p.Conns(), p.Accepted())
	}
}

// proxied returns a client through p, closed at cleanup.
func proxied(t *testing.T, p *redistest.Proxy) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	c := proxied(t, p)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	const lat = 100 * time.Millisecond
	p.SetLatency(lat)
	start := time.Now()
	if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	// One chunk each way, each held for lat.
	if el := time.Since(start); el < 2*lat {
		t.Fatalf("PING took %v with %v latency each way", el, lat)
	}

	// Pipelined commands keep their order.
	pipe := c.Pipeline()
	incrs := make([]*redis.IntCmd, 100)
	for i := range incrs {
		incrs[i] = pipe.Incr(ctxTimeout(t, 5*time.Second), "n")
	}
	if _, err := pipe.Exec(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range incrs {
		if cmd.Val() != int64(i+1) {
			t.Fatalf("INCR #%d = %d", i, cmd.Val())
		}
	}

	p.SetLatency(0)
	start = time.Now()
	if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= lat {
		t.Fatalf("PING took %v after latency reset", el)
	}
}

// Latency delays each connection independently rather than queueing them.
func TestProxyLatencyConcurrent(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	const n = 6
	clients := make([]*redis.Client, n)
	for i := range clients {
		clients[i] = proxied(t, p)
		if err := clients[i].Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const lat = 200 * time.Millisecond
	p.SetLatency(lat)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range clients {
		wg.Go(func() { errs[i] = c.Ping(ctxTimeout(t, 5*time.Second)).Err() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if el < 2*lat || el > n*2*lat/2 {
		t.Fatalf("%d concurrent PINGs took %v with %v latency each way", n, el, lat)
	}
}

func TestProxyBlackHole(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	c := proxied(t, p)
	direct := s.Client(t)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	p.BlackHole(true)
	if err := c.Ping(ctxTimeout(t, 300*time.Millisecond)).Err(); err == nil {
		t.Fatal("PING through a black hole answered")
	}
	// A new connection is accepted but goes nowhere either.
	fresh := proxied(t, p)
	if err := fresh.Ping(ctxTimeout(t, 300*time.Millisecond)).Err(); err == nil {
		t.Fatal("PING on a new connection through a black hole answered")
	}
	if err := direct.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatalf("direct PING during black hole: %v", err)
	}
	p.BlackHole(false)
	if err := c.Set(ctxTimeout(t, 2*time.Second), "after", "1", 0).Err(); err != nil {
		t.Fatalf("SET after black hole: %v", err)
	}
	if err := fresh.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatalf("PING on second client after black hole: %v", err)
	}
}

// Silence kills the connections open then, silently and for good, and no
// other: the pooled connection swallows a command, and the next one, on a
// connection dialed after it, is answered.
func TestProxySilence(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	c := proxied(t, p)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if n := p.Silence(); n != 1 {
		t.Fatalf("Silence silenced %d connections, want the one pooled", n)
	}
	if err := c.Ping(ctxTimeout(t, 300*time.Millisecond)).Err(); err == nil {
		t.Fatal("PING on a silenced connection answered")
	}
	// go-redis dropped the connection whose command timed out: this
	// one goes on a new connection, which Silence did not touch.
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatalf("PING on a connection dialed after Silence: %v", err)
	}
}

// A black hole in front of a dead target still accepts and holds connections.
func TestProxyBlackHoleDeadTarget(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	s.MustKill(t)
	p.BlackHole(true)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := conn.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read through black hole to a dead server: %v, want a timeout", err)
	}
}

func TestProxyResetConnections(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	c := proxied(t, p)
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	before := p.Accepted()
	p.ResetConnections()
	if n := p.Conns(); n != 0 {
		t.Fatalf("%d connections left after reset", n)
	}
	// go-redis either notices the dead connection and redials, or reports
	// the failure once; either way it ends up on a new connection.
	_ = c.Ping(ctxTimeout(t, 2*time.Second)).Err()
	if err := c.Ping(ctxTimeout(t, 2*time.Second)).Err(); err != nil {
		t.Fatalf("PING after reset: %v", err)
	}
	if p.Accepted() <= before {
		t.Fatal("client did not reconnect after ResetConnections")
	}
}

func TestProxyCloseWithOpenConnections(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p, err := redistest.NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(time.Hour) // leave data parked in the proxy
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	_ = c.Ping(ctxTimeout(t, 200*time.Millisecond)).Err()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// That Close stops listening is TestProxyCloseStopsListening's: a
	// dial to the closed port may reach whatever took the port since.
	// goleak in TestMain checks that no proxy goroutine survived.
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, 3, 1)
	if len(c.Nodes()) != 6 || len(c.Addrs()) != 6 {
		t.Fatalf("%d nodes, %d addrs", len(c.Nodes()), len(c.Addrs()))
	}
	cc := c.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 {
		t.Fatalf("%d shards", len(shards))
	}
	for _, sh := range shards {
		if len(sh.Nodes) != 2 {
			t.Fatalf("shard %v has %d nodes", sh.Slots, len(sh.Nodes))
		}
	}
	for i := range 100 {
		if err := cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		v, err := cc.Get(ctx, fmt.Sprintf("key-%d", i)).Int()
		if err != nil || v != i {
			t.Fatalf("GET key-%d = %d, %v", i, v, err)
		}
	}
	var mu sync.Mutex
	var sizes []int64
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 {
		t.Fatalf("%d primaries", len(sizes))
	}
	for _, n := range sizes {
		if n == 0 {
			t.Fatalf("keys not spread over primaries: %v", sizes)
		}
	}
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinel(t, 2, 3)
	if g.MasterName() != "mymaster" || len(g.SentinelAddrs()) != 3 || len(g.Replicas()) != 2 {
		t.Fatalf("master %q, %d sentinels, %d replicas", g.MasterName(), len(g.SentinelAddrs()), len(g.Replicas()))
	}
	fc := g.FailoverClient(t)
	ctx := ctxTimeout(t, 40*time.Second)
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := fc.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
	old := g.Primary()
	if old == nil || old != g.Servers()[0] {
		t.Fatalf("Primary() = %v before failover", old)
	}
	// Make sure both replicas have the write, so whichever is promoted
	// keeps it.
	if n, err := old.Client(t).Wait(ctx, 2, 5000).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}

	if err := g.Failover(); err != nil {
		t.Fatal(err)
	}
	np := g.Primary()
	if np == nil || np == old {
		t.Fatalf("Primary() after failover = %v (old %s)", np, old.Addr())
	}
	for _, r := range g.Replicas() {
		if r == np {
			t.Fatal("Replicas() includes the primary")
		}
	}
	direct := np.Client(t)
	if v, err := direct.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("GET k on new primary = %q, %v", v, err)
	}
	// The failover client follows the switch; until it has, a write may
	// still reach the old primary, so retry until the new one has it.
	eventually(t, 15*time.Second, func() error {
		if err := fc.Set(ctxTimeout(t, time.Second), "k", "after", 0).Err(); err != nil {
			return err
		}
		v, err := direct.Get(ctxTimeout(t, time.Second), "k").Result()
		if err == nil && v != "after" {
			err = fmt.Errorf("new primary has k = %q", v)
		}
		return err
	})
	if v, err := fc.Get(ctx, "k").Result(); err != nil || v != "after" {
		t.Fatalf("GET k via failover client = %q, %v", v, err)
	}
}

func TestClusterWithoutReplicas(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, 1, 0)
	cc := c.Client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := cc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
}
