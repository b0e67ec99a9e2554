package lease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

// quorumGroup starts n independent servers and returns them with one
// client each for a quorum manager, and one for looking at each server.
func quorumGroup(t *testing.T, n int) (servers []*redistest.Server, clients []redis.UniversalClient, raw []*redis.Client) {
	for range n {
		s := redistest.Start(t)
		servers = append(servers, s)
		clients = append(clients, s.Client(t))
		raw = append(raw, s.Client(t))
	}
	return servers, clients, raw
}

func newQuorum(t *testing.T, clients []redis.UniversalClient, opts ...lease.Option) *lease.Manager {
	t.Helper()
	m, err := lease.NewQuorum(clients, append([]lease.Option{lease.WithLogger(quiet), lease.WithOpTimeout(500 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// reconnect gives every server of a group its own fresh clients, so that
// connections a paused server left half-used are not reused.
func reconnect(t *testing.T, servers []*redistest.Server) []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, s := range servers {
		out = append(out, s.Client(t))
	}
	return out
}

func TestQuorumFivePrimaries(t *testing.T) {
	servers, clients, raw := quorumGroup(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Renewals every second: room for five servers and a race detector
	// on a busy machine (at 1s, with one every 333ms, a lease was lost).
	const ttl = 3 * time.Second
	a := newQuorum(t, clients, lease.WithTTL(ttl))
	b := newQuorum(t, reconnect(t, servers), lease.WithTTL(ttl))

	// The counters of independent servers start apart (each is seeded from
	// its own clock): the first acquisition raises them to its fence.
	l, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	held, raised := 0, 0
	for _, c := range raw {
		if c.Get(ctx, "tenure:{job}").Val() == l.Token() {
			held++
		}
		// Servers that answered after the majority decided may hand out
		// more; what matters is that a majority will not hand out less.
		if f, _ := c.Get(ctx, "tenure:{job}:fence").Int64(); f >= l.Fence() {
			raised++
		}
	}
	if held < 3 || raised < 3 {
		t.Fatalf("the lease is on %d servers, %d counters reach its fence; want a majority of both", held, raised)
	}
	if _, err := b.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("second holder: %v, want ErrNotAcquired", err)
	}
	time.Sleep(2 * ttl) // renewed on a majority
	if l.Err() != nil {
		t.Fatalf("lost while every server is up: %v", l.Err())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns once a majority let go; the others' answers come in
	// the background, soon.
	for i, c := range raw {
		for start := time.Now(); c.Exists(ctx, "tenure:{job}").Val() != 0; time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("server %d still has the lease 10s after Release", i)
			}
		}
	}

	t.Run("Unsupported", func(t *testing.T) {
		if _, err := reentrant.New(a).Lock(ctx, "re"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("reentrant lock: %v, want ErrUnsupported", err)
		}
		if _, err := a.Acquire(ctx, "fair", lease.WithFair(true)); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("fair acquire: %v, want ErrUnsupported", err)
		}
		if _, err := lease.NewQuorum(clients, lease.WithFair(true)); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("NewQuorum with WithFair: %v, want ErrUnsupported", err)
		}
		if _, err := lease.NewQuorum(append(clients[:1:1], clients[0])); !errors.Is(err, lease.ErrInvalidOption) {
			t.Fatalf("a client twice: %v, want ErrInvalidOption", err)
		}
		l, err := a.TryAcquire(ctx, "exec")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if _, err := l.Exec(ctx, func(redis.Pipeliner) error { return nil }); err == nil {
			t.Fatal("Exec in quorum mode succeeded")
		}
	})

	t.Run("MutualExclusion", func(t *testing.T) {
		chk := newChecker()
		var wg sync.WaitGroup
		for w := range 4 {
			m := []*lease.Manager{a, b}[w%2]
			wg.Go(func() {
				for range 8 {
					l, err := m.Acquire(ctx, "shared")
					if err != nil {
						t.Error(err)
						return
					}
					who := strconv.Itoa(w)
					chk.enter("shared", who, l.Fence())
					time.Sleep(time.Millisecond)
					chk.leave("shared", who)
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
	})

	t.Run("WaiterWokenByRelease", func(t *testing.T) {
		w := newQuorum(t, reconnect(t, servers), lease.WithTTL(time.Minute), lease.WithBackOff(slowPolling))
		l, err := a.Acquire(ctx, "wake", lease.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := w.Acquire(ctx, "wake")
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(200 * time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not woken by the release (its backoff is a minute)")
		}
	})

	t.Run("TwoOfFivePaused", func(t *testing.T) {
		before, err := a.TryAcquire(ctx, "minority")
		if err != nil {
			t.Fatal(err)
		}
		lastFence := before.Fence()
		if err := before.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A release returns once a majority deleted the key; the others
		// may still be deleting it. Pausing two of the majority before the
		// rest have would leave the name held on a majority of the live
		// servers.
		for _, s := range servers {
			c := s.Client(t)
			for start := time.Now(); c.Exists(ctx, "tenure:{minority}").Val() != 0; time.Sleep(time.Millisecond) {
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%s still has the released key", s.Addr())
				}
			}
		}
		servers[3].MustPause(t)
		servers[4].MustPause(t)
		defer servers[3].MustResume(t)
		defer servers[4].MustResume(t)

		start := time.Now()
		l, err := a.TryAcquire(ctx, "minority")
		if err != nil {
			t.Fatalf("acquire with two of five servers paused: %v", err)
		}
		took := time.Since(start)
		// Waiting for the paused servers would take their bound, min(TTL,
		// op timeout): here ten minutes, so that a wait for them is a
		// hang, told from a slow machine by a minute, not a race against
		// the clock. The acquire returns with the majority.
		patient := newQuorum(t, reconnect(t, servers), lease.WithTTL(10*time.Minute), lease.WithOpTimeout(10*time.Minute))
		returned := make(chan error, 1)
		go func() {
			pl, err := patient.TryAcquire(context.Background(), "minority-patient")
			if err == nil {
				err = pl.Release(context.Background())
			}
			returned <- err
		}()
		select {
		case err := <-returned:
			if err != nil {
				t.Fatalf("acquire and release with two of five servers paused: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("an acquire waited for the paused servers (its bound for them is ten minutes)")
		}
		if l.Fence() <= lastFence {
			t.Fatalf("fence %d after %d", l.Fence(), lastFence)
		}
		if _, err := b.TryAcquire(ctx, "minority"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("second holder: %v, want ErrNotAcquired", err)
		}
		time.Sleep(3 * ttl) // renewals confirmed by the three servers left
		if l.Err() != nil {
			t.Fatalf("lost with a majority up: %v", l.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release with two servers paused: %v", err)
		}
		l2, err := b.TryAcquire(ctx, "minority")
		if err != nil {
			t.Fatalf("acquire after the release: %v", err)
		}
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
		}
		t.Logf("acquire in %v with two servers paused; fences %d, %d, %d", took, lastFence, l.Fence(), l2.Fence())

		// A third server stops: no majority is left.
		ended := endedAt(l2.Context())
		servers[2].MustPause(t)
		defer servers[2].MustResume(t)
		waitDone(t, l2, 3*ttl)
		at, _ := ended()
		if !errors.Is(context.Cause(l2.Context()), lease.ErrLost) {
			t.Fatalf("cause %v, want ErrLost", context.Cause(l2.Context()))
		}
		t.Logf("with three of five paused the holder cancelled %v after its local deadline", at.Sub(l2.Deadline()))
		tctx, tcancel := context.WithTimeout(ctx, ttl)
		defer tcancel()
		if l, err := a.TryAcquire(tctx, "other"); err == nil {
			t.Fatalf("a lease (fence %d) granted with three of five servers paused", l.Fence())
		} else {
			t.Logf("acquire with three of five paused: %v", err)
		}
	})

	// Everything back: leases work again.
	l, err = b.Acquire(ctx, "minority")
	if err != nil {
		t.Fatalf("after the servers resumed: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// S5 in quorum mode: every node hands out max(counter + 1, its clock), so
// counters that went back on every node (older snapshots everywhere) still
// give a larger fence; and the raised counters expire with the lease (S6).
func TestQuorumFenceGrowsAfterCountersWentBack(t *testing.T) {
	_, clients, raw := quorumGroup(t, 3)
	ctx := context.Background()
	m := newQuorum(t, clients, lease.WithTTL(time.Minute))
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range raw {
		// The lease key first: a node that answered after the majority
		// may take it between two reads, and acquire.lua writes the key
		// and the counter together.
		if c.Exists(ctx, "tenure:{job}").Val() == 1 {
			if ttl := c.PTTL(ctx, "tenure:{job}:fence").Val(); ttl <= 0 {
				t.Errorf("node %d: counter TTL %v while the lease is held there", i, ttl)
			}
		}
	}
	first := l.Fence()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range raw {
		c.Set(ctx, "tenure:{job}:fence", 1, time.Minute)
	}
	l, err = m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= first {
		t.Fatalf("fence %d after counters went back to 1, not above %d", l.Fence(), first)
	}
}

// A held name keeps its counter on every node of the quorum, as in
// single-node mode: the counter raise.lua raises must outlive the lock key
// by a TTL, since the watchdog's light renewals renew the lock key alone
// and count on that. Two names are held, taken together, so that their
// renewals share batches (renew_leases.lua, where renewals are light).
// The counters of nodes 0 and 1 start far ahead, apart, so that every
// majority hands out different fences and some of its nodes raise theirs.
// The renewal interval, 0.35 TTL, makes the first two renewals light (sent
// by 0.7 TTL, their limit before one TTL) and the third, sent at 1.05 TTL,
// the first full one: a counter that lived only as long as the lock's
// first TTL is gone by then, on every node that raised it, and nothing
// brings it back.
func TestQuorumHeldNameKeepsItsCounter(t *testing.T) {
	_, clients, raw := quorumGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = time.Second
	names := []string{"kept", "kept2"}
	ahead := time.Now().Add(time.Hour).UnixMicro()
	for _, n := range names {
		raw[0].Set(ctx, "tenure:{"+n+"}:fence", ahead, time.Minute)
		raw[1].Set(ctx, "tenure:{"+n+"}:fence", 2*ahead, time.Minute)
	}
	m := newQuorum(t, clients, lease.WithTTL(ttl), lease.WithRenewInterval(ttl*35/100))
	s, err := m.AcquireAll(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(ctx)
	for _, l := range s.Leases() {
		if l.Fence() <= ahead {
			t.Fatalf("%s: fence %d, not above the counters set ahead (%d, %d)", l.Name(), l.Fence(), ahead, 2*ahead)
		}
	}
	for _, l := range s.Leases() {
		checkQuorumCounter(t, raw, l, true)
	}
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if s.Err() != nil {
			t.Fatalf("lost while every node is up: %v", s.Err())
		}
		for _, l := range s.Leases() {
			// A node may miss a renewal on a loaded machine and let its
			// key go while a majority still holds: from here on, only
			// that a node holding the name keeps its counter.
			checkQuorumCounter(t, raw, l, false)
		}
	}
}

// checkQuorumCounter fails unless every node where l holds its name keeps
// the name's counter, and, with majority, a majority of them at l's fence.
func checkQuorumCounter(t *testing.T, raw []*redis.Client, l *lease.Lease, majority bool) {
	t.Helper()
	ctx := context.Background()
	raised := 0
	for i, c := range raw {
		if c.Get(ctx, "tenure:{"+l.Name()+"}").Val() != l.Token() {
			continue // not yet: a node the acquire did not wait for
		}
		f, err := c.Get(ctx, "tenure:{"+l.Name()+"}:fence").Int64()
		if err != nil {
			t.Fatalf("node %d holds %s without its counter: %v", i, l.Name(), err)
		}
		if f >= l.Fence() {
			raised++
		}
	}
	if majority && raised < len(raw)/2+1 {
		t.Fatalf("%d nodes hold %s with a counter at its fence %d, want a majority", raised, l.Name(), l.Fence())
	}
}
