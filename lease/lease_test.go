package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/lease"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// allowance is the scheduling slack granted to "no later than" checks: the
// time between a timer firing and its goroutine running, under -race on a
// loaded two-core machine.
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

func waitDone(t *testing.T, l *lease.Lease, within time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("lease %q still live after %v", l.Name(), within)
	}
}

// checker records critical sections per name and reports overlaps and
// fences that do not strictly increase.
type checker struct {
	mu       sync.Mutex
	inside   map[string]string // name -> holder inside
	last     map[string]int64
	sections int
	errs     []string
}

func newChecker() *checker {
	return &checker{inside: map[string]string{}, last: map[string]int64{}}
}

func (c *checker) enter(name, holder string, fence int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.inside[name]; ok {
		c.errs = append(c.errs, fmt.Sprintf("%s: %s entered while %s was inside", name, holder, other))
	}
	if fence <= c.last[name] {
		c.errs = append(c.errs, fmt.Sprintf("%s: fence %d after %d", name, fence, c.last[name]))
	}
	c.inside[name], c.last[name] = holder, fence
	c.sections++
}

func (c *checker) leave(name, holder string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inside[name] == holder {
		delete(c.inside, name)
	}
}

func TestMutualExclusionUnderContention(t *testing.T) {
	srv := redistest.Start(t)
	chk := newChecker()
	names := []string{"alpha", "beta"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var lost atomic.Int64
	for mi := range 3 {
		m := newManager(t, srv.Client(t), lease.WithTTL(time.Second))
		for g := range 16 {
			holder := fmt.Sprintf("m%d/g%d", mi, g)
			wg.Go(func() {
				for ctx.Err() == nil {
					name := names[rand.IntN(len(names))]
					l, err := m.Acquire(ctx, name)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s: acquire: %v", holder, err)
						}
						return
					}
					chk.enter(name, holder, l.Fence())
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					// Leave before releasing: once the delete reaches the
					// server, another holder may enter.
					chk.leave(name, holder)
					if l.Err() != nil {
						lost.Add(1)
					}
					if err := l.Release(context.Background()); err != nil {
						t.Errorf("%s: release: %v", holder, err)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, e := range chk.errs {
		t.Error(e)
	}
	if chk.sections < 100 {
		t.Errorf("only %d critical sections: the test exercised nothing", chk.sections)
	}
	if lost.Load() != 0 {
		t.Errorf("%d leases lost without any fault", lost.Load())
	}
	t.Logf("%d critical sections, no overlap", chk.sections)
}

func TestLossByPartitionCancelsBeforeServerExpiry(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cut.Close() })
	ttl := time.Second
	a := newManager(t, cut, lease.WithTTL(ttl), lease.WithOpTimeout(200*time.Millisecond))
	b := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()

	la, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	aEnded := endedAt(la.Context())
	time.Sleep(ttl / 2) // a renewal or so
	proxy.BlackHole(true)
	defer proxy.BlackHole(false)
	deadline := la.Deadline()

	lb, err := b.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	defer lb.Release(ctx)
	at, done := aEnded()
	if !done {
		t.Fatal("B acquired while A's lease context was still live")
	}
	if !errors.Is(context.Cause(la.Context()), lease.ErrLost) || la.Err() != lease.ErrLost {
		t.Fatalf("cause %v, Err %v", context.Cause(la.Context()), la.Err())
	}
	if at.After(deadline.Add(allowance)) {
		t.Fatalf("A cancelled %v after its own deadline", at.Sub(deadline))
	}
	if !at.Before(got) {
		t.Fatalf("A cancelled at %v, after B acquired at %v", at, got)
	}
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence %d after %d", lb.Fence(), la.Fence())
	}
}

func TestLossByTakeover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	interval := 200 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(interval))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	key := "tenure:{job}"
	if got := raw.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("key holds %q, want the token", got)
	}
	raw.Del(ctx, key)
	raw.Set(ctx, key, "intruder", time.Minute)
	taken := time.Now()
	waitDone(t, l, interval+allowance+50*time.Millisecond)
	if time.Since(taken) > interval+allowance {
		t.Fatalf("loss detected after %v", time.Since(taken))
	}
	if context.Cause(l.Context()) != lease.ErrLost {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release = %v, want ErrNotHeld", err)
	}
	if got := raw.Get(ctx, key).Val(); got != "intruder" {
		t.Fatalf("Release touched the other holder's key: %q", got)
	}
}

func TestReleaseBeforeDetectionLeavesTakeoverInPlace(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(10*time.Second))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "tenure:{job}", "intruder", time.Minute) // before any renewal
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release = %v, want ErrNotHeld", err)
	}
	if got := raw.Get(ctx, "tenure:{job}").Val(); got != "intruder" {
		t.Fatalf("key %q", got)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Extend after release = %v", err)
	}
}

func TestPausedRedisCancelsByLocalDeadline(t *testing.T) {
	srv := redistest.Start(t)
	ttl := 600 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl), lease.WithOpTimeout(200*time.Millisecond))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	ended := endedAt(l.Context())
	time.Sleep(ttl / 2)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	deadline := l.Deadline()
	waitDone(t, l, ttl+allowance)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	at, _ := ended()
	if at.After(deadline.Add(allowance)) {
		t.Fatalf("cancelled %v after the local deadline", at.Sub(deadline))
	}
	if l.Err() != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
	}
}

func TestFenceGrowsAcrossRestartWithoutPersistence(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	m := newManager(t, c)
	ctx := context.Background()
	var last int64
	for range 5 {
		l, err := m.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("restart kept %d keys: not a data-losing restart", n)
	}
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= last {
		t.Fatalf("fence %d after restart, not above %d", l.Fence(), last)
	}
}

func TestRenewalKeepsLeaseAcrossTenTTLs(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ttl := 200 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	time.Sleep(10 * ttl)
	if l.Err() != nil {
		t.Fatalf("lost: %v", l.Err())
	}
	if !l.Deadline().After(first.Add(8 * ttl)) {
		t.Fatalf("deadline did not follow renewals: %v then %v", first, l.Deadline())
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl <= 0 {
		t.Fatalf("server TTL %v", pttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key left after release")
	}
	if context.Cause(l.Context()) != lease.ErrReleased {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second Release = %v", err)
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var leases []*lease.Lease
	for i := range 50 {
		l, err := m.Acquire(ctx, fmt.Sprint("job-", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if context.Cause(l.Context()) != lease.ErrClosed {
			t.Fatalf("%s: cause %v", l.Name(), context.Cause(l.Context()))
		}
	}
	if keys := raw.Keys(ctx, "tenure:{*}").Val(); len(keys) != 0 {
		t.Fatalf("left %d lease keys after Close: %v", len(keys), keys[:1])
	}
	if _, err := m.Acquire(ctx, "job-0"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// goleak in TestMain checks that nothing is left running.
}

func TestCloseWakesWaiters(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	other := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, err := other.Acquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, "job")
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = m.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, lease.ErrClosed) {
			t.Fatalf("waiter got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
}

func TestAcquireHonoursContext(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Acquire(cancelled, "job"); !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("Acquire with cancelled ctx = %v", err)
	}
	if n := srv.Client(t).Exists(context.Background(), "tenure:{job}").Val(); n != 0 {
		t.Fatal("a cancelled Acquire took the name")
	}

	holder, err := m.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	start := time.Now()
	_, err = m.Acquire(ctx, "job")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("Acquire = %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("Acquire returned %v after its context ended", waited-100*time.Millisecond)
	}
}

func TestAcquireCtxBoundsWaitNotLease(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(300*time.Millisecond))
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "trace"))
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(time.Second)
	if l.Err() != nil {
		t.Fatalf("cancelling Acquire's ctx ended the lease: %v", l.Err())
	}
	if l.Context().Value(key{}) != "trace" {
		t.Fatal("lease context lost the values of Acquire's ctx")
	}
}

func TestTryAcquire(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("second TryAcquire = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, "job"); err != nil {
		t.Fatalf("TryAcquire after release = %v", err)
	}
}

// A waiter whose backoff step is an hour still takes the name when the
// holder dies without releasing: steps are capped by the holder's TTL.
func TestWaitIsCappedByHolderTTL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	dead := newManager(t, srv.Client(t))
	if _, err := dead.Acquire(ctx, "job", lease.WithTTL(300*time.Millisecond), lease.WithAutoRenew(false)); err != nil {
		t.Fatal(err)
	}
	hour := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	m := newManager(t, srv.Client(t), lease.WithBackOff(hour))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := m.Acquire(wctx, "job"); err != nil {
		t.Fatalf("waiter did not get the expired name: %v", err)
	}
}

func TestBackOffStopGivesUp(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, err := m.Acquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	stop := func() backoff.BackOff { return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 3) }
	if _, err := m.Acquire(ctx, "job", lease.WithBackOff(stop)); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("Acquire = %v", err)
	}
}

func TestNoRenewLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", lease.WithTTL(300*time.Millisecond), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, time.Second)
	if l.Err() != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
	}
	time.Sleep(50 * time.Millisecond)
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key outlived its TTL")
	}
}

func TestExtend(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", lease.WithTTL(time.Second), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl < 9*time.Second {
		t.Fatalf("server TTL %v after Extend(10s)", pttl)
	}
	if d := l.Deadline(); d.Before(before.Add(9*time.Second)) || d.After(time.Now().Add(10*time.Second)) {
		t.Fatalf("deadline %v", time.Until(d))
	}
	// A shorter TTL never shortens the lease on the server (S8).
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl < 9*time.Second {
		t.Fatalf("Extend(1s) shortened the server TTL to %v", pttl)
	}
	if err := l.Extend(ctx, time.Millisecond); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Extend(1ms) = %v", err)
	}
}

func TestDoReleasesAndReportsLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := context.Background()

	boom := errors.New("boom")
	err := m.Do(ctx, "job", func(ctx context.Context) error {
		if raw.Exists(ctx, "tenure:{job}").Val() != 1 {
			t.Error("fn ran without the lease")
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("Do left the lease behind")
	}

	err = m.Do(ctx, "job", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
		<-ctx.Done()
		if context.Cause(ctx) != lease.ErrLost {
			t.Errorf("fn's cause %v", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do after loss = %v", err)
	}
	if raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatal("Do released another holder's lease")
	}

	cctx, cancel := context.WithCancel(ctx)
	err = m.Do(cctx, "other", func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do with cancelled ctx = %v", err)
	}
	if raw.Exists(ctx, "tenure:{other}").Val() != 0 {
		t.Fatal("Do did not release after its ctx was cancelled")
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	func() {
		defer func() { _ = recover() }()
		_ = m.Do(context.Background(), "job", func(context.Context) error { panic("boom") })
	}()
	if raw.Exists(context.Background(), "tenure:{job}").Val() != 0 {
		t.Fatal("a panicking fn left its lease behind")
	}
}

// The local deadline counts from when the acquire was sent, not answered.
func TestDeadlineCountsFromSend(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.SetLatency(150 * time.Millisecond) // each way
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	ttl := 2 * time.Second
	m := newManager(t, slow, lease.WithTTL(ttl))
	ctx := context.Background()
	if err := slow.Ping(ctx).Err(); err != nil { // connect first: dialling is not the request
		t.Fatal(err)
	}
	before := time.Now()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if after.Sub(before) < 300*time.Millisecond {
		t.Fatalf("round trip %v: the proxy added no latency", after.Sub(before))
	}
	drift := ttl/100 + 2*time.Millisecond
	if d := l.Deadline(); d.After(before.Add(ttl - drift + 20*time.Millisecond)) {
		t.Fatalf("deadline %v after send+ttl-drift: counted from the reply", d.Sub(before.Add(ttl-drift)))
	}
	if d := l.Deadline(); !d.Before(before.Add(ttl)) {
		t.Fatal("deadline not before send time + TTL")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An Acquire that times out may still be applied by the server later (S7):
// here the server is paused, so both the timed-out request and the
// manager's clean-up wait in its socket buffers and run on resume, in either
// order. Neither order may leave a phantom lease blocking the name for its
// TTL.
func TestTimedOutAcquireLeavesNoPhantom(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := srv.Client(t)
	m := newManager(t, c, lease.WithTTL(time.Minute))
	bg := context.Background()
	for _, cl := range []*redis.Client{raw, c} {
		if err := cl.Ping(bg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(ctx, "job"); err == nil {
		t.Fatal("Acquire succeeded on a paused server")
	}
	time.Sleep(200 * time.Millisecond) // the clean-up is sent meanwhile
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// Both requests run as soon as the server resumes.
	time.Sleep(500 * time.Millisecond)
	if raw.Exists(bg, "tenure:{job}").Val() != 0 {
		t.Fatal("a phantom lease blocks the name after a timed-out Acquire")
	}
	applied := raw.Exists(bg, "tenure:{job}:fence").Val() == 1
	marked := len(raw.Keys(bg, "tenure:{job}:retired:*").Val()) == 1
	if !applied && !marked {
		t.Fatal("neither the acquire nor the clean-up reached the server: the test proved nothing")
	}
	t.Logf("acquire applied before its clean-up: %v", applied)
	if _, err := m.TryAcquire(bg, "job"); err != nil {
		t.Fatalf("name not free: %v", err)
	}
}

// countingHook counts the commands a client sends.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestBadInputFailsBeforeAnyRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	hook := &countingHook{}
	c.AddHook(hook)

	badOptions := map[string][]lease.Option{
		"zero TTL":               {lease.WithTTL(0)},
		"negative TTL":           {lease.WithTTL(-time.Second)},
		"TTL below 10ms":         {lease.WithTTL(9 * time.Millisecond)},
		"interval at half TTL":   {lease.WithTTL(time.Second), lease.WithRenewInterval(500 * time.Millisecond)},
		"interval above TTL":     {lease.WithTTL(time.Second), lease.WithRenewInterval(2 * time.Second)},
		"zero interval":          {lease.WithRenewInterval(0)},
		"negative drift":         {lease.WithDrift(0.01, -time.Millisecond)},
		"drift factor 1":         {lease.WithDrift(1, 0)},
		"drift factor NaN":       {lease.WithDrift(nanFloat(), 0)},
		"drift eats the renewal": {lease.WithTTL(time.Second), lease.WithDrift(0.5, 200*time.Millisecond)},
		"prefix with brace":      {lease.WithKeyPrefix("a{b")},
		"nil logger":             {lease.WithLogger(nil)},
		"nil backoff":            {lease.WithBackOff(nil)},
		"nil option":             {nil},
		"zero op timeout":        {lease.WithOpTimeout(0)},
	}
	for name, opts := range badOptions {
		if _, err := lease.New(c, opts...); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := lease.New(nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	var nilClient *redis.Client
	if _, err := lease.New(nilClient); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("typed nil client: %v", err)
	}

	m := newManager(t, c)
	ctx := context.Background()
	badNames := map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", lease.MaxNameLen+1),
		"not UTF8": "bad\xff",
		"brace":    "}job",
	}
	for what, name := range badNames {
		if _, err := m.Acquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Acquire(%s) = %v", what, err)
		}
		if _, err := m.TryAcquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("TryAcquire(%s) = %v", what, err)
		}
		if err := m.Do(ctx, name, func(context.Context) error { return nil }); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Do(%s) = %v", what, err)
		}
	}
	if _, err := m.Acquire(ctx, "ok", lease.WithTTL(time.Millisecond)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Acquire with 1ms TTL = %v", err)
	}
	if _, err := m.Acquire(ctx, "ok", lease.WithTTL(time.Second), lease.WithRenewInterval(time.Second)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Acquire with interval = TTL: %v", err)
	}
	if err := m.Do(ctx, "ok", nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Do(nil fn) = %v", err)
	}
	if n := hook.n.Load(); n != 0 {
		t.Fatalf("bad input sent %d commands to Redis", n)
	}
	if _, err := m.Acquire(ctx, strings.Repeat("x", lease.MaxNameLen)); err != nil {
		t.Fatalf("a name of exactly MaxNameLen bytes: %v", err)
	}
	if hook.n.Load() == 0 {
		t.Fatal("the hook counts nothing: the test proved nothing")
	}
}

func nanFloat() float64 {
	zero := 0.0
	return zero / zero
}

func TestKeyPrefixSeparatesManagers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := newManager(t, srv.Client(t), lease.WithKeyPrefix("app1:"))
	b := newManager(t, srv.Client(t), lease.WithKeyPrefix("app2:"))
	if _, err := a.TryAcquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "job"); err != nil {
		t.Fatalf("different prefixes collided: %v", err)
	}
	if srv.Client(t).Exists(ctx, "app1:{job}", "app2:{job}").Val() != 2 {
		t.Fatal("keys not under their prefixes")
	}
}

// A name held by a key of another type (a hash, say) is held: acquire
// waits, and nothing fails with WRONGTYPE.
func TestNameHeldByOtherTypeIsHeld(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	raw.HSet(ctx, "tenure:{job}", "owner", 1)
	raw.PExpire(ctx, "tenure:{job}", 300*time.Millisecond)
	m := newManager(t, srv.Client(t))
	if _, err := m.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquire over a hash = %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := m.Acquire(wctx, "job")
	if err != nil {
		t.Fatalf("Acquire after the hash expired: %v", err)
	}
	raw.Del(ctx, "tenure:{job}")
	raw.HSet(ctx, "tenure:{job}", "owner", 1)
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release over a hash = %v", err)
	}
	if raw.Type(ctx, "tenure:{job}").Val() != "hash" {
		t.Fatal("Release touched the hash")
	}
}

// After SCRIPT FLUSH (or a restart that kept the data), renewal and release
// fall back from EVALSHA to EVAL and keep working.
func TestScriptFlushDoesNotBreakRenewal(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if l.Err() != nil {
		t.Fatalf("lost after SCRIPT FLUSH: %v", l.Err())
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key left after release")
	}
}

// Close waits for an acquire in flight; the lease it brings back is
// released, not leaked, and its caller gets ErrClosed.
func TestCloseDuringAcquireInFlight(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := srv.Client(t)
	m, err := lease.New(c, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	for _, cl := range []*redis.Client{raw, c} {
		if err := cl.Ping(bg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	srv.MustPause(t)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(bg, "job")
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire is on its way
	go func() {
		time.Sleep(300 * time.Millisecond)
		srv.MustResume(t)
	}()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire in flight during Close = %v", err)
	}
	if raw.Exists(bg, "tenure:{job}").Val() != 0 {
		t.Fatal("the lease acquired during Close was left on the server")
	}
}

// The mutual-exclusion property itself (S1), under partitions: one of three
// managers is cut off from Redis and reconnected over and over while all
// contend for two names. Whenever a holder enters, every other holder of the
// name must already have seen its lease context cancelled.
func TestMutualExclusionWithPartitions(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cut.Close() })
	// A wider drift margin than the default keeps the test about logic,
	// not about how late the race detector's scheduler runs a timer.
	opts := []lease.Option{lease.WithTTL(time.Second), lease.WithDrift(0.05, 5*time.Millisecond), lease.WithOpTimeout(300 * time.Millisecond)}
	// The cut-off manager waits in the fair queue: its release messages
	// are lost to the black holes, and polling it would hardly ever win
	// the names from managers woken by messages, so the partitions would
	// rarely catch it holding one.
	managers := []*lease.Manager{newManager(t, cut, append(opts, lease.WithFair(true))...), newManager(t, srv.Client(t), opts...), newManager(t, srv.Client(t), opts...)}

	var (
		mu         sync.Mutex
		inside     = map[string][]*lease.Lease{}
		last       = map[string]int64{}
		violations []string
		sections   atomic.Int64
		losses     atomic.Int64
	)
	enter := func(l *lease.Lease) {
		mu.Lock()
		defer mu.Unlock()
		for _, other := range inside[l.Name()] {
			if other.Context().Err() == nil {
				violations = append(violations, fmt.Sprintf("%s: fence %d entered while fence %d still held it", l.Name(), l.Fence(), other.Fence()))
			}
		}
		if l.Fence() <= last[l.Name()] {
			violations = append(violations, fmt.Sprintf("%s: fence %d after %d", l.Name(), l.Fence(), last[l.Name()]))
		}
		last[l.Name()] = l.Fence()
		inside[l.Name()] = append(inside[l.Name()], l)
		sections.Add(1)
	}
	leave := func(l *lease.Lease) {
		mu.Lock()
		defer mu.Unlock()
		ls := inside[l.Name()]
		for i, x := range ls {
			if x == l {
				inside[l.Name()] = append(ls[:i], ls[i+1:]...)
				break
			}
		}
	}

	run, stop := context.WithTimeout(context.Background(), 6*time.Second)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { // the fault schedule
		for run.Err() == nil {
			proxy.BlackHole(true)
			sleepCtx(run, 1500*time.Millisecond)
			proxy.BlackHole(false)
			sleepCtx(run, 700*time.Millisecond)
		}
	})
	names := []string{"alpha", "beta"}
	for mi, m := range managers {
		for range 8 {
			wg.Go(func() {
				for run.Err() == nil {
					actx, cancel := context.WithTimeout(run, 300*time.Millisecond)
					l, err := m.Acquire(actx, names[rand.IntN(2)])
					cancel()
					if err != nil {
						continue // timed out behind the black hole, or the run ended
					}
					enter(l)
					// The cut-off manager holds long enough to be cut off
					// while holding; the others hand over quickly.
					hold := time.Duration(rand.IntN(100)) * time.Millisecond
					if mi == 0 {
						hold = 2 * time.Second
					}
					sleepCtx(l.Context(), hold)
					if l.Err() == lease.ErrLost {
						losses.Add(1)
					}
					leave(l)
					rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					_ = l.Release(rctx)
					cancel()
					if mi != 0 {
						// Woken by release messages, the managers that
						// reach Redis would otherwise hand the names to
						// each other and starve the cut-off one, whose
						// messages a black hole swallows.
						sleepCtx(run, time.Duration(rand.IntN(200))*time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	proxy.BlackHole(false)
	for _, v := range violations {
		t.Error(v)
	}
	if losses.Load() == 0 || sections.Load() < 20 {
		t.Fatalf("%d sections, %d losses: the partitions exercised nothing", sections.Load(), losses.Load())
	}
	t.Logf("%d critical sections, %d leases lost to partitions, no overlap", sections.Load(), losses.Load())
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Releasing a lease lost to its local deadline still deletes it, token-
// safely, when the server is back: the name is free at once, not when its
// TTL runs out.
func TestReleaseAfterDeadlineLossFreesTheName(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cut.Close() })
	// A wide drift: the local deadline comes at half the TTL, well before the
	// server's expiry.
	m := newManager(t, cut, lease.WithTTL(4*time.Second), lease.WithRenewInterval(time.Second), lease.WithDrift(0.5, 0))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole(true)
	waitDone(t, l, 3*time.Second)
	proxy.BlackHole(false)
	if l.Err() != lease.ErrLost || raw.Exists(ctx, "tenure:{job}").Val() != 1 {
		t.Fatalf("Err %v; the key should outlive the local deadline here", l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release = %v", err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("the lost lease's key still blocks the name after Release")
	}
}

// Extend that finds the lease taken over loses it at once, and touches
// nothing of the new holder.
func TestExtendFindsTakeover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(10*time.Second), lease.WithRenewInterval(3*time.Second))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "tenure:{job}", "intruder", 5*time.Second)
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Extend = %v", err)
	}
	if l.Err() != lease.ErrLost || context.Cause(l.Context()) != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl > 5*time.Second || raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatalf("Extend touched the new holder's lease (TTL %v)", pttl)
	}
	// An explicit interval of 3s rules out a TTL that is not above 6s.
	l2, err := m.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Extend(ctx, 6*time.Second); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Extend below twice the interval = %v", err)
	}
}

// A client without ContextTimeoutEnabled waits out a stalled command for its
// ReadTimeout whatever the context says; Acquire, Extend and Release are
// bounded by their contexts all the same, and an acquire answered after its
// caller left is taken back.
func TestContextBoundsCallsOnAClientThatIgnoresIt(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	bg := context.Background()
	for _, cl := range []*redis.Client{raw, c} {
		if err := cl.Ping(bg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	held, err := m.Acquire(bg, "held")
	if err != nil {
		t.Fatal(err)
	}

	srv.MustPause(t)
	bounded := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a paused server = %v, want the context's error", what, err)
		}
		if took := time.Since(start); took > 200*time.Millisecond+time.Second {
			t.Errorf("%s took %v with a 200ms context", what, took)
		}
	}
	bounded("Acquire", func(ctx context.Context) error { _, err := m.Acquire(ctx, "job"); return err })
	bounded("Extend", func(ctx context.Context) error { return held.Extend(ctx, 2*time.Minute) })
	bounded("Release", func(ctx context.Context) error { return held.Release(ctx) })
	srv.MustResume(t)

	// The acquire that was answered after its caller left is taken back,
	// and the release completes in the background.
	deadline := time.Now().Add(5 * time.Second)
	for raw.Exists(bg, "tenure:{job}", "tenure:{held}").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a late answer left a lease behind: job %d held %d", raw.Exists(bg, "tenure:{job}").Val(), raw.Exists(bg, "tenure:{held}").Val())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if raw.Exists(bg, "tenure:{job}:fence").Val() != 1 {
		t.Fatal("the late acquire never ran: the test proved nothing")
	}
}

// A takeover between renewals that only the release finds is a loss: the
// work may have run beside another holder. Release says so (ErrLost as well
// as ErrNotHeld), and Do returns an error wrapping ErrLost though fn
// returned nil.
func TestTakeoverFoundAtReleaseIsALoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t)) // renewals every 10s: none during the test
	ctx := context.Background()

	err := m.Do(ctx, "job", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do whose release found a takeover = %v, want ErrLost", err)
	}
	if raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatal("Do released another holder's lease")
	}

	l, err := m.Acquire(ctx, "deleted")
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenure:{deleted}")
	err = l.Release(ctx)
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of a deleted lease = %v, want ErrLost and ErrNotHeld", err)
	}

	// An ordinary release is no loss, nor is a second one.
	l, err = m.Acquire(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("second Release = %v, want ErrNotHeld only", err)
	}
}
