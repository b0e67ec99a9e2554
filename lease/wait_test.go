package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// slowPolling makes every backoff step far longer than the test: a waiter
// that gets the name within the test was woken by a release message.
func slowPolling() backoff.BackOff { return backoff.NewConstantBackOff(time.Minute) }

func TestWaitersAreWokenByReleaseMessages(t *testing.T) {
	srv := redistest.Start(t)
	opts := []lease.Option{lease.WithTTL(time.Minute), lease.WithBackOff(slowPolling)}
	managers := []*lease.Manager{newManager(t, srv.Client(t), opts...), newManager(t, srv.Client(t), opts...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := managers[0].Acquire(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		errs  = make(chan error, waiters)
	)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := managers[i%2].Acquire(ctx, "hot")
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			errs <- l.Release(ctx)
		}()
	}
	time.Sleep(200 * time.Millisecond) // every waiter tried once and listens
	start := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Eight handoffs, each a release message and an attempt: nowhere near
	// one backoff step (a minute).
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("eight handoffs took %v", took)
	}
	if len(order) != waiters {
		t.Fatalf("%d waiters served", len(order))
	}
}

func TestWaitersSurviveALostPubSubConnection(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = viaProxy.Close() })
	holder := newManager(t, srv.Client(t), lease.WithTTL(time.Minute))
	waiter := newManager(t, viaProxy, lease.WithTTL(time.Minute), lease.WithBackOff(slowPolling))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l, err := holder.Acquire(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "n")
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	proxy.ResetConnections() // the pub/sub connection too
	time.Sleep(500 * time.Millisecond)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not hear the release after its pub/sub connection was reset")
	}
}

// queueLen waits until name's fair queue holds n waiters.
func queueLen(t *testing.T, raw redis.Cmdable, name string, n int) {
	t.Helper()
	for start := time.Now(); raw.ZCard(context.Background(), "tenure:{"+name+"}:queue").Val() != int64(n); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the queue of %q never held %d waiters", name, n)
		}
	}
}

func TestFairModeGrantsInArrivalOrderAcrossManagers(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	opts := []lease.Option{lease.WithTTL(time.Minute), lease.WithFair(true)}
	checkFairOrder(t, raw, []*lease.Manager{newManager(t, srv.Client(t), opts...), newManager(t, srv.Client(t), opts...)}, 6)
	if n := raw.Exists(context.Background(), "tenure:{fifo}:queue", "tenure:{fifo}:queue:expiry").Val(); n != 0 {
		t.Fatal("the queue outlived its waiters")
	}
}

// checkFairOrder queues waiters on the name "fifo", spread unevenly over
// managers (fair mode), one after another, and checks that they are granted
// it in that order.
func checkFairOrder(t *testing.T, raw redis.Cmdable, managers []*lease.Manager, waiters int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := managers[0].Acquire(ctx, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		wg.Go(func() {
			l, err := managers[(i*7/3)%len(managers)].Acquire(ctx, "fifo") // not alternating: a manager queues several
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		// Wait until waiter i has its place in the queue.
		queueLen(t, raw, "fifo", i+1)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("granted in order %v, want arrival order", order)
		}
	}
}

func TestFairWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Minute), lease.WithFair(true))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := m.Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	quitter, quit := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := m.Acquire(quitter, "q")
		gaveUp <- err
	}()
	queueLen(t, raw, "q", 1)
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "q", lease.WithBackOff(slowPolling))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	queueLen(t, raw, "q", 2)
	quit()
	if err := <-gaveUp; !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Had the quitter kept its place, the second waiter would wait for the
	// queue to forget it (DefaultQueueTimeout).
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(lease.DefaultQueueTimeout - time.Second):
		t.Fatal("the second waiter waited behind a waiter that had given up")
	}
}

// A fair waiter that gives up while its attempt is on its way leaves the
// queue once the late reply is in (it joined the queue with that attempt),
// not when the queue forgets it: the others must not wait behind it. The
// client does not end a round trip with its context, so the caller leaves
// before the attempt reaches the server.
func TestFairWaiterGivingUpMidAttemptLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	if _, err := newManager(t, srv.Client(t), lease.WithTTL(time.Minute)).Acquire(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	proxy := redistest.StartProxy(t, srv.Addr())
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = slow.Close() })
	m := newManager(t, slow, lease.WithFair(true))
	if err := slow.Ping(ctx).Err(); err != nil { // connected before the latency
		t.Fatal(err)
	}
	proxy.SetLatency(500 * time.Millisecond)
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := m.Acquire(actx, "q")
	cancel()
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("the waiter that gave up: %v", err)
	}
	// The attempt arrives after the caller left, and joins the queue.
	var forgetAt int64
	waitFor(t, 30*time.Second, func() bool {
		z := raw.ZRangeWithScores(ctx, "tenure:{q}:queue:expiry", 0, -1).Val()
		if len(z) == 1 {
			forgetAt = int64(z[0].Score)
		}
		return len(z) == 1
	})
	waitFor(t, 30*time.Second, func() bool { return raw.ZCard(ctx, "tenure:{q}:queue").Val() == 0 })
	// Order in the server's clock: it left before the queue would have
	// forgotten it.
	if now := raw.Time(ctx).Val().UnixMilli(); now >= forgetAt {
		t.Fatalf("the waiter left the queue only when forgotten (%d ms after its time was up)", now-forgetAt)
	}
	proxy.SetLatency(0)
}

func TestFairQueueForgetsDeadWaiters(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Minute))
	ctx := context.Background()
	// A waiter that died: queued, with an expiry in the past.
	raw.ZAdd(ctx, "tenure:{d}:queue", redis.Z{Score: 1, Member: "dead"})
	raw.ZAdd(ctx, "tenure:{d}:queue:expiry", redis.Z{Score: 1, Member: "dead"})
	l, err := m.TryAcquire(ctx, "d")
	if err != nil {
		t.Fatalf("a dead waiter blocked the name: %v", err)
	}
	_ = l.Release(ctx)
	// A live one blocks barging acquires until its turn is over.
	now := time.Now().UnixMilli()
	raw.ZAdd(ctx, "tenure:{d}:queue", redis.Z{Score: 2, Member: "alive"})
	raw.ZAdd(ctx, "tenure:{d}:queue:expiry", redis.Z{Score: float64(now + 60_000), Member: "alive"})
	if _, err := m.TryAcquire(ctx, "d"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquire jumped the queue: %v", err)
	}
}

func TestExecWritesOnlyWhileHeld(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Minute))
	ctx := context.Background()
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
	if len(cmds) != 2 || cmds[1].(*redis.IntCmd).Val() != 105 {
		t.Fatalf("results %v", cmds)
	}
	// fn's error sends nothing.
	boom := errors.New("boom")
	if _, err := l.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "balance:{acct}", 0, 0)
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Exec = %v, want fn's error", err)
	}

	// Another holder takes over; the old holder's write must not land.
	raw.Set(ctx, "tenure:{acct}", "intruder", time.Minute)
	_, err = l.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "balance:{acct}", 0, 0)
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec after a takeover = %v, want ErrLost", err)
	}
	if got := raw.Get(ctx, "balance:{acct}").Val(); got != "105" {
		t.Fatalf("balance %q: a lost lease wrote", got)
	}
	if l.Err() != lease.ErrLost {
		t.Fatalf("lease not lost after Exec found it taken over: %v", l.Err())
	}
	if _, err := l.Exec(ctx, func(p redis.Pipeliner) error { return nil }); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec on a lost lease = %v", err)
	}
}

func TestExecRetriesWhenARenewalTouchesTheKey(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	// A renewal every 10ms: many transactions see the key touched.
	m := newManager(t, srv.Client(t), lease.WithTTL(100*time.Millisecond), lease.WithRenewInterval(10*time.Millisecond))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for range 50 {
		if _, err := l.Exec(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "n:{busy}")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := raw.Get(ctx, "n:{busy}").Val(); got != "50" {
		t.Fatalf("counter %s after 50 guarded increments", got)
	}
}

// A fair waiter whose attempt won the name but was answered too late to be
// trusted hands that lease back under its token in the background. Its
// next attempt must not reuse the token: the server would answer "held"
// just before the release deletes the key (a lease nobody holds on the
// server), or refuse the retired token until its retirement expires.
func TestFairWaiterTakesAFreshTokenAfterALateWin(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	// One connection: the waiter's next attempt and the release of its
	// late lease queue for it one after the other.
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	ctx := context.Background()
	a := newManager(t, srv.Client(t))
	// A lease is trusted for TTL - drift = 500ms after its request was sent.
	b := newManager(t, slow, lease.WithTTL(10*time.Second), lease.WithDrift(0.95, 0),
		lease.WithRenewInterval(100*time.Millisecond), lease.WithBackOff(slowPolling))

	held, err := a.Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, "q", lease.WithFair(true))
		got <- result{l, err, time.Now()}
	}()
	waitFor(t, 10*time.Second, func() bool { return raw.Exists(ctx, "tenure:{q}:queue").Val() == 1 })
	waitFor(t, 10*time.Second, func() bool { return len(raw.PubSubChannels(ctx, "tenure:{q}:released").Val()) == 1 })
	// From now on a round trip through the proxy takes 600ms: too long.
	proxy.SetLatency(300 * time.Millisecond)
	heldToken := held.Token()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The waiter's attempt reaches the server and takes the name; its
	// answer is still on its way back when the proxy speeds up again.
	waitFor(t, 10*time.Second, func() bool {
		v, err := raw.Get(ctx, "tenure:{q}").Result()
		return err == nil && v != heldToken
	})
	late := raw.Get(ctx, "tenure:{q}").Val()
	// Its answer arrives 300ms later, too late; what the waiter sends next
	// is then in the proxy, and SetLatency lets it through at once.
	time.Sleep(400 * time.Millisecond)
	proxy.SetLatency(0)
	start := time.Now()

	var r result
	select {
	case r = <-got:
	case <-time.After(8 * time.Second):
		t.Fatal("the waiter is still waiting 8s after its late win: it is stalled on its retired token")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() == late {
		t.Fatalf("the waiter was handed the lease it had won too late (token %s), which it releases in the background", late)
	}
	// Whatever was on its way has arrived: the lease handed over is the
	// one the server holds.
	time.Sleep(time.Second)
	if v := raw.Get(ctx, "tenure:{q}").Val(); v != r.l.Token() || r.l.Err() != nil {
		t.Fatalf("server holds %q, the waiter's lease is %s (err %v); waited %v", v, r.l.Token(), r.l.Err(), r.at.Sub(start))
	}
}
