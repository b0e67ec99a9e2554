package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestCluster runs every feature through a redis.ClusterClient on one
// three-primary cluster with a replica each. The subtests share the cluster
// (starting one costs a few seconds) and use names of their own; the last
// ones move a slot and fail a primary over.
func TestCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("MutualExclusionAndFences", func(t *testing.T) {
		managers := []*lease.Manager{newManager(t, cl.Client(t)), newManager(t, cl.Client(t))}
		chk := newChecker()
		names := []string{"a", "b", "c", "d", "e", "f"} // spread over the three primaries
		if err := managers[0].Do(ctx, "a", func(ctx context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					name := names[(w+i)%len(names)]
					l, err := managers[w%2].Acquire(ctx, name)
					if err != nil {
						t.Error(err)
						return
					}
					who := strconv.Itoa(w)
					chk.enter(name, who, l.Fence())
					time.Sleep(time.Millisecond)
					chk.leave(name, who)
					if err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if len(chk.errs) > 0 {
			t.Fatal(strings.Join(chk.errs, "\n"))
		}
		// The names did land on every primary.
		owners := map[string]bool{}
		for _, n := range names {
			c, err := cl.Client(t).MasterForKey(ctx, "tenure:{"+n+"}")
			if err != nil {
				t.Fatal(err)
			}
			owners[c.Options().Addr] = true
		}
		if len(owners) != 3 {
			t.Fatalf("the names live on %d primaries, want 3", len(owners))
		}
	})

	t.Run("RenewalsArePipelinedPerNode", func(t *testing.T) {
		cc := redis.NewClusterClient(cl.ClusterOptions())
		t.Cleanup(func() { _ = cc.Close() })
		counts := &nodeCounts{pipelines: map[string]int{}, cmds: map[string]int{}}
		cc.OnNewNode(func(c *redis.Client) { c.AddHook(nodeHook{addr: c.Options().Addr, counts: counts}) })
		m := newManager(t, cc, lease.WithTTL(600*time.Millisecond))
		const n = 60
		held := make([]*lease.Lease, n)
		for i := range held {
			l, err := m.Acquire(ctx, fmt.Sprintf("renew-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			held[i] = l
		}
		counts.reset()
		const window = 2 * time.Second // ten renewal rounds, every 200ms
		time.Sleep(window)
		pipelines, cmds := counts.snapshot()
		for _, l := range held {
			if l.Err() != nil {
				t.Fatalf("%s lost: %v", l.Name(), l.Err())
			}
		}
		t.Logf("per node over %v: pipelines %v, renewals %v", window, pipelines, cmds)
		if len(cmds) != 3 {
			t.Fatalf("renewals reached %d primaries, want 3", len(cmds))
		}
		total := 0
		for addr, c := range cmds {
			total += c
			// Each round is one pipeline per node, however many of the
			// node's leases it renews: far fewer pipelines than commands.
			// (No bound on the rounds themselves: on a loaded machine the
			// leases' schedules drift apart and a round may take two.)
			if p := pipelines[addr]; p == 0 || c < 5*p {
				t.Fatalf("node %s: %d renewals in %d pipelines: not batched per node", addr, c, p)
			}
		}
		if total < n*8 {
			t.Fatalf("%d renewals of %d leases in %v, want about %d", total, n, window, n*10)
		}
	})

	t.Run("Reentrant", func(t *testing.T) {
		m := newManager(t, cl.Client(t), lease.WithTTL(time.Second))
		k := reentrant.New(m)
		other := reentrant.New(newManager(t, cl.Client(t)))
		lk, err := k.Lock(ctx, "re")
		if err != nil {
			t.Fatal(err)
		}
		inner, err := k.Lock(lk.Context(), "re") // the same owner enters again
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.TryLock(ctx, "re"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("another owner: %v, want ErrNotAcquired", err)
		}
		time.Sleep(1500 * time.Millisecond) // renewed past its TTL
		if err := inner.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.TryLock(ctx, "re"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("after one unlock of two: %v, want ErrNotAcquired", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lk2, err := other.TryLock(ctx, "re")
		if err != nil {
			t.Fatal(err)
		}
		if lk2.Fence() <= lk.Fence() {
			t.Fatalf("fence %d after %d", lk2.Fence(), lk.Fence())
		}
		_ = lk2.Unlock(ctx)
	})

	t.Run("WaitersWokenByReleaseMessages", func(t *testing.T) {
		opts := []lease.Option{lease.WithTTL(time.Minute), lease.WithBackOff(slowPolling)}
		a, b := newManager(t, cl.Client(t), opts...), newManager(t, cl.Client(t), opts...)
		for _, name := range []string{"wake-a", "wake-b", "wake-c"} {
			held, err := a.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := b.Acquire(ctx, name)
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(200 * time.Millisecond) // the waiter tried once and listens
			start := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the waiter was not woken by the release (its backoff is a minute)", name)
			}
			t.Logf("%s: handoff in %v", name, time.Since(start))
		}
	})

	t.Run("FairOrder", func(t *testing.T) {
		opts := []lease.Option{lease.WithTTL(time.Minute), lease.WithFair(true)}
		checkFairOrder(t, cl.Client(t), []*lease.Manager{newManager(t, cl.Client(t), opts...), newManager(t, cl.Client(t), opts...)}, 4)
	})

	t.Run("Exec", func(t *testing.T) {
		raw := cl.Client(t)
		m := newManager(t, cl.Client(t), lease.WithTTL(time.Minute))
		l, err := m.Acquire(ctx, "acct")
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := l.Exec(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "balance:{acct}", 100, 0)
			p.IncrBy(ctx, "balance:{acct}", 5)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if cmds[1].(*redis.IntCmd).Val() != 105 {
			t.Fatalf("results %v", cmds)
		}
		raw.Set(ctx, "tenure:{acct}", "intruder", time.Minute)
		if _, err := l.Exec(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "balance:{acct}", 0, 0)
			return nil
		}); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Exec after a takeover = %v, want ErrLost", err)
		}
		if got := raw.Get(ctx, "balance:{acct}").Val(); got != "105" {
			t.Fatalf("balance %q: a lost lease wrote", got)
		}
	})

	t.Run("SlotMigration", func(t *testing.T) {
		testSlotMigration(ctx, t, cl)
	})

	t.Run("Failover", func(t *testing.T) {
		testClusterFailover(ctx, t, cl)
	})
}

// nodeCounts counts, per cluster node, pipelines and the commands in them.
type nodeCounts struct {
	mu        sync.Mutex
	pipelines map[string]int
	cmds      map[string]int
}

func (c *nodeCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.pipelines)
	clear(c.cmds)
}

func (c *nodeCounts) snapshot() (pipelines, cmds map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pipelines, cmds = map[string]int{}, map[string]int{}
	for k, v := range c.pipelines {
		pipelines[k] = v
	}
	for k, v := range c.cmds {
		cmds[k] = v
	}
	return pipelines, cmds
}

// nodeHook counts the renewal scripts one node client sends in pipelines.
type nodeHook struct {
	addr   string
	counts *nodeCounts
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if name := c.Name(); name == "evalsha" || name == "eval" {
				n += leasesIn(c.Args())
			}
		}
		if n > 0 {
			h.counts.mu.Lock()
			h.counts.pipelines[h.addr]++
			h.counts.cmds[h.addr] += n
			h.counts.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// leasesIn counts the leases a script call names: its lease keys
// (tenure:{N}, nothing after the brace), declared (renew_leases.lua,
// renew.lua) or among the arguments (renew_node.lua, which also declares
// the first), at least one a call.
func leasesIn(args []any) int {
	n := 0
	for _, a := range args[min(3, len(args)):] {
		s, ok := a.(string)
		if p, isPtr := a.(*string); isPtr {
			s, ok = *p, true
		}
		if ok && strings.HasPrefix(s, "tenure:{") && strings.HasSuffix(s, "}") {
			n++
		}
	}
	if declared, _ := args[2].(int); declared == 1 && n > 1 {
		n--
	}
	return max(n, 1)
}

// nodeIDs maps each cluster node's address to its id.
func nodeIDs(ctx context.Context, t *testing.T, cl *redistest.Cluster) (ids map[string]string, clients map[string]*redis.Client) {
	t.Helper()
	ids, clients = map[string]string{}, map[string]*redis.Client{}
	for _, s := range cl.Nodes() {
		c := s.Client(t)
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[s.Addr()], clients[s.Addr()] = id, c
	}
	return ids, clients
}

// contender tries to take name over and over until stop; it reports every
// time it got it, which must never happen while the holder holds it.
func contender(ctx context.Context, m *lease.Manager, name string, holderHolds func() bool) (stop func() (wins, overlaps int)) {
	var (
		done           = make(chan struct{})
		finished       = make(chan struct{})
		wins, overlaps atomic.Int64
	)
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			l, err := m.TryAcquire(tctx, name)
			cancel()
			if err == nil {
				wins.Add(1)
				if holderHolds() {
					overlaps.Add(1)
				}
				_ = l.Release(ctx)
			}
		}
	}()
	return func() (int, int) {
		close(done)
		<-finished
		return int(wins.Load()), int(overlaps.Load())
	}
}

// testSlotMigration moves the slot of a held lease to another primary while
// the lease is renewed and a contender keeps trying to take it.
func testSlotMigration(ctx context.Context, t *testing.T, cl *redistest.Cluster) {
	cc := cl.Client(t)
	m := newManager(t, cc, lease.WithTTL(time.Second))
	l, err := m.Acquire(ctx, "migrating")
	if err != nil {
		t.Fatal(err)
	}
	key := "tenure:{migrating}"
	slot := int(cc.ClusterKeySlot(ctx, key).Val())
	src, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ids, clients := nodeIDs(ctx, t, cl)
	srcAddr := src.Options().Addr
	var dstAddr string
	for _, n := range cl.Nodes()[:3] {
		if n.Addr() != srcAddr {
			dstAddr = n.Addr()
			break
		}
	}
	srcC, dstC := clients[srcAddr], clients[dstAddr]
	dstPort := strings.TrimPrefix(dstAddr, "127.0.0.1:")

	stop := contender(ctx, newManager(t, cl.Client(t)), "migrating", func() bool { return l.Err() == nil })
	must := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	must(dstC, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[srcAddr])
	must(srcC, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dstAddr])
	time.Sleep(400 * time.Millisecond) // renewals while the slot is migrating, keys still on the source
	keys, err := srcC.ClusterGetKeysInSlot(ctx, slot, 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	args := []any{"MIGRATE", "127.0.0.1", dstPort, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	must(srcC, args...)
	time.Sleep(400 * time.Millisecond) // renewals answered ASK by the source
	for _, n := range cl.Nodes()[:3] {
		must(clients[n.Addr()], "CLUSTER", "SETSLOT", slot, "NODE", ids[dstAddr])
	}
	time.Sleep(1500 * time.Millisecond) // more than a TTL on the new owner
	wins, overlaps := stop()
	t.Logf("moved slot %d (%d keys) from %s to %s; the contender won %d times, %d while the holder held", slot, len(keys), srcAddr, dstAddr, wins, overlaps)
	if overlaps > 0 {
		t.Fatalf("%d overlaps during the migration", overlaps)
	}
	if err := l.Err(); err != nil {
		// A loss must be reported, never hidden; it is not expected here.
		if !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
			t.Fatalf("lease ended with %v, want ErrLost", context.Cause(l.Context()))
		}
		t.Fatalf("lease lost during the migration (reported): %v", err)
	}
	if got := dstC.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("the new owner has %q, want the holder's token", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testClusterFailover promotes the replica of the primary that holds a
// lease (CLUSTER FAILOVER, coordinated: the replica catches up first) while
// the lease is renewed and a contender keeps trying.
func testClusterFailover(ctx context.Context, t *testing.T, cl *redistest.Cluster) {
	cc := cl.Client(t)
	m := newManager(t, cc, lease.WithTTL(time.Second))
	l, err := m.Acquire(ctx, "failing")
	if err != nil {
		t.Fatal(err)
	}
	key := "tenure:{failing}"
	primary, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, clients := nodeIDs(ctx, t, cl)
	var replica *redis.Client
	for _, c := range clients {
		info := c.Info(ctx, "replication").Val()
		if strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+strings.TrimPrefix(primary.Options().Addr, "127.0.0.1:")) {
			replica = c
		}
	}
	if replica == nil {
		t.Fatal("no replica of the lease's primary")
	}
	stop := contender(ctx, newManager(t, cl.Client(t)), "failing", func() bool { return l.Err() == nil })
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(replica.Info(ctx, "replication").Val(), "role:master") {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the replica never became primary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	promoted := time.Since(start)
	time.Sleep(2 * time.Second) // two TTLs on the new primary
	wins, overlaps := stop()
	t.Logf("failover took %v; the contender won %d times, %d while the holder held; holder: %v", promoted, wins, overlaps, l.Err())
	if overlaps > 0 {
		t.Fatalf("%d overlaps during the failover", overlaps)
	}
	if err := l.Err(); err != nil {
		if !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
			t.Fatalf("lease ended with %v, want ErrLost", context.Cause(l.Context()))
		}
		t.Logf("lease lost during the failover, and reported: %v", err)
		return
	}
	if got := replica.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("the new primary has %q, want the holder's token", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
