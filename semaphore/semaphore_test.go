package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

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

// live counts the permits whose context is live, and fails the test the
// moment more than n are.
type live struct {
	t    *testing.T
	n    int64
	cur  atomic.Int64
	peak atomic.Int64
}

// hold counts p until its context ends (or end is called).
func (c *live) hold(p *lease.Lease) func() {
	now := c.cur.Add(1)
	if now > c.n {
		c.t.Errorf("%d live permits, at most %d allowed", now, c.n)
	}
	for {
		if old := c.peak.Load(); now <= old || c.peak.CompareAndSwap(old, now) {
			break
		}
	}
	var once sync.Once
	end := func() { once.Do(func() { c.cur.Add(-1) }) }
	stop := context.AfterFunc(p.Context(), end)
	return func() { stop(); end() }
}

func TestNeverMoreThanNLivePermits(t *testing.T) {
	srv := redistest.Start(t)
	const n, workers, rounds = 3, 12, 15
	var ms []*semaphore.Permits
	for range 3 {
		ms = append(ms, semaphore.New(newManager(t, srv.Client(t), lease.WithTTL(2*time.Second))))
	}
	c := &live{t: t, n: n}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var fences sync.Map
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			p := ms[w%len(ms)]
			for range rounds {
				l, err := p.Acquire(ctx, "builders", n)
				if err != nil {
					t.Error(err)
					return
				}
				if _, dup := fences.LoadOrStore(l.Fence(), true); dup {
					t.Errorf("fence %d handed out twice", l.Fence())
				}
				end := c.hold(l)
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				end()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if c.peak.Load() < 2 {
		t.Fatalf("at most %d permit(s) were ever held at once: the test did not contend", c.peak.Load())
	}
	// The permits are gone; what stays (the fence counter, the release
	// markers) outlives them by at most a TTL (S6).
	raw := srv.Client(t)
	for _, k := range raw.Keys(context.Background(), "tenure:{builders}*").Val() {
		if k == "tenure:{builders}" || k == "tenure:{builders}:permits" {
			t.Errorf("%s left after every release", k)
		}
		if ttl := raw.PTTL(context.Background(), k).Val(); ttl <= 0 || ttl > 2*time.Second {
			t.Errorf("%s left with TTL %v", k, ttl)
		}
	}
}

// TryAcquire fails at once when n permits are held; a request that
// resizes is judged by its new n, and lowering n revokes nothing.
func TestTryAcquireAndChangingN(t *testing.T) {
	srv := redistest.Start(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	var held []*lease.Lease
	for range 3 {
		l, err := p.TryAcquire(ctx, "crawl", 3)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if _, err := p.TryAcquire(ctx, "crawl", 3); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a fourth permit of 3: %v", err)
	}
	// Lowered: the three keep their permits; nobody new gets in.
	if _, err := p.TryAcquire(ctx, "crawl", 2, semaphore.WithResize(true)); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a permit of 2 with 3 held: %v", err)
	}
	for _, l := range held {
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("a holder above a lowered n must keep its permit: %v", err)
		}
	}
	// Raised: one more gets in.
	fourth, err := p.TryAcquire(ctx, "crawl", 4, semaphore.WithResize(true))
	if err != nil {
		t.Fatal(err)
	}
	// Releasing two of four leaves two: none for n=2, one for n=3.
	for _, l := range held[:2] {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.TryAcquire(ctx, "crawl", 2, semaphore.WithResize(true)); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a permit of 2 with 2 held: %v", err)
	}
	if _, err := p.TryAcquire(ctx, "crawl", 3, semaphore.WithResize(true)); err != nil {
		t.Fatalf("a permit of 3 with 2 held: %v", err)
	}
	if err := fourth.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	for _, n := range []int{0, -1} {
		if _, err := p.Acquire(ctx, "x", n); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("n=%d: %v", n, err)
		}
	}
	if _, err := p.TryAcquire(ctx, "", 1); !errors.Is(err, lease.ErrInvalidName) {
		t.Errorf("empty name: %v", err)
	}
	if err := p.Do(ctx, "x", 1, nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("nil function: %v", err)
	}
	var zero semaphore.Permits
	if _, err := zero.Acquire(ctx, "x", 1); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("zero Permits: %v", err)
	}
}

// A lease and the permits of one name exclude each other: one name is one
// lock.
func TestLeaseAndPermitsExcludeEachOther(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	p := semaphore.New(m)
	ctx := context.Background()
	l, err := m.TryAcquire(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(ctx, "mixed", 5); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a permit beside a lease: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	pl, err := p.TryAcquire(ctx, "mixed", 5)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Fence() <= l.Fence() {
		t.Fatalf("the permit's fence %d is not above the lease's %d", pl.Fence(), l.Fence())
	}
	if _, err := m.TryAcquire(ctx, "mixed"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a lease beside a permit: %v", err)
	}
}

// A permit's holder that stops renewing (it died) loses it by its TTL, and
// a waiter gets it then.
func TestDeadHolderFreesItsPermit(t *testing.T) {
	srv := redistest.Start(t)
	dead := semaphore.New(newManager(t, srv.Client(t)))
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	ttl := 300 * time.Millisecond
	// Without renewal, as if the process died after acquiring.
	gone, err := dead.Acquire(ctx, "slot", 1, lease.WithTTL(ttl), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := p.Acquire(wctx, "slot", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if gone.Err() == nil {
		t.Fatal("the dead holder's permit was given away while its context was live")
	}
	if l.Fence() <= gone.Fence() {
		t.Fatalf("fence %d after %d", l.Fence(), gone.Fence())
	}
}

// Loss by partition: the holder cannot reach Redis, its context is
// cancelled with ErrLost before another holder gets the permit.
func TestLossByPartitionCancelsBeforeServerExpiry(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cut.Close() })
	ttl := time.Second
	a := semaphore.New(newManager(t, cut, lease.WithTTL(ttl), lease.WithOpTimeout(200*time.Millisecond)))
	b := semaphore.New(newManager(t, srv.Client(t), lease.WithTTL(ttl)))
	ctx := context.Background()

	var las []*lease.Lease
	for range 2 {
		la, err := a.Acquire(ctx, "pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		las = append(las, la)
	}
	proxy.BlackHole(true)
	defer proxy.BlackHole(false)
	lb, err := b.Acquire(ctx, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	for _, la := range las {
		select {
		case <-la.Done():
		default:
			t.Fatal("B got a permit while both of A's contexts could still be live")
		}
		if !errors.Is(context.Cause(la.Context()), lease.ErrLost) {
			t.Fatalf("cause %v", context.Cause(la.Context()))
		}
		if lb.Fence() <= la.Fence() {
			t.Fatalf("fence %d after %d", lb.Fence(), la.Fence())
		}
	}
}

// Loss by takeover: the permits are deleted (an operator's release --force)
// and the name taken by a lease; the renewal finds it and cancels.
func TestLossByTakeover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	var losses sync.Map
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond),
		lease.WithHooks(lease.Hooks{Ended: func(l *lease.Lease, info lease.EndInfo) { losses.Store(l.Name(), info.Loss) }}))
	p := semaphore.New(m)
	ctx := context.Background()
	freed, err := p.Acquire(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := p.Acquire(ctx, "b", 2)
	if err != nil {
		t.Fatal(err)
	}
	raw.ZRem(ctx, "tenure:{a}", freed.Token())
	raw.Del(ctx, "tenure:{b}")
	raw.Set(ctx, "tenure:{b}", "intruder", time.Minute)
	for _, c := range []struct {
		l    *lease.Lease
		loss lease.LossReason
	}{{freed, lease.LossDeleted}, {taken, lease.LossTakenOver}} {
		select {
		case <-c.l.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not lost", c.l.Name())
		}
		if !errors.Is(context.Cause(c.l.Context()), lease.ErrLost) {
			t.Fatalf("%s: cause %v", c.l.Name(), context.Cause(c.l.Context()))
		}
		// The context is cancelled before the Ended hook runs (cancellation
		// must not wait for hooks): wait for the hook too.
		var got any
		waitUntil(t, func() bool { got, _ = losses.Load(c.l.Name()); return got != nil })
		if got != c.loss {
			t.Errorf("%s: loss %v, want %v", c.l.Name(), got, c.loss)
		}
	}
}

func TestCloseReleasesEveryPermit(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	p := semaphore.New(m)
	ctx := context.Background()
	var held []*lease.Lease
	for i := range 4 {
		l, err := p.Acquire(ctx, fmt.Sprint("s", i%2), 2)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range held {
		if !errors.Is(l.Err(), lease.ErrClosed) {
			t.Fatalf("after Close: %v", l.Err())
		}
	}
	for _, k := range []string{"tenure:{s0}", "tenure:{s1}", "tenure:{s0}:permits", "tenure:{s1}:permits"} {
		if n := raw.Exists(ctx, k).Val(); n != 0 {
			t.Errorf("%s still exists after Close", k)
		}
	}
}

func TestRenewalKeepsPermitsAcrossTTLs(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ttl := 300 * time.Millisecond
	p := semaphore.New(newManager(t, srv.Client(t), lease.WithTTL(ttl)))
	other := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	l, err := p.Acquire(ctx, "long", 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		time.Sleep(ttl)
		if _, err := other.TryAcquire(ctx, "long", 1); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("the renewed permit was given away: %v", err)
		}
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	if ttl := raw.PTTL(ctx, "tenure:{long}:permits").Val(); ttl <= 0 {
		t.Fatalf("the fences' hash has TTL %v", ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFairPermitsGoInOrder(t *testing.T) {
	srv := redistest.Start(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	first, err := p.Acquire(ctx, "fair", 1)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 4
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	raw := srv.Client(t)
	for i := range waiters {
		wg.Go(func() {
			l, err := p.Acquire(ctx, "fair", 1, lease.WithFair(true))
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			_ = l.Release(ctx)
		})
		// The next waiter joins the queue after this one.
		for raw.ZCard(ctx, "tenure:{fair}:queue").Val() < int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d got its permit in place %d", got, want)
		}
		want++
	}
}

func TestExecUnderPermit(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	l, err := p.Acquire(ctx, "exec", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Exec(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "out:{exec}", l.Fence(), 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw.ZRem(ctx, "tenure:{exec}", l.Token())
	if _, err := l.Exec(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "out:{exec}", "stale", 0)
		return nil
	}); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec after the permit was taken: %v", err)
	}
	if got := raw.Get(ctx, "out:{exec}").Val(); got != fmt.Sprint(l.Fence()) {
		t.Fatalf("the stale Exec wrote %q", got)
	}
}

func TestDoReportsLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	err := p.Do(ctx, "do", 2, func(ctx context.Context) error {
		l, _ := lease.FromContext(ctx)
		raw.ZRem(ctx, "tenure:{do}", l.Token())
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do whose permit was taken away: %v", err)
	}
	if err := p.Do(ctx, "do", 2, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestQuorumRefusesSemaphores(t *testing.T) {
	var clients []redis.UniversalClient
	for range 3 {
		clients = append(clients, redistest.Start(t).Client(t))
	}
	m, err := lease.NewQuorum(clients, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := semaphore.New(m).TryAcquire(context.Background(), "q", 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("quorum semaphore: %v", err)
	}
}
