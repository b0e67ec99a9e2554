package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

// S6 for permits: a semaphore's keys live as long as its latest live
// permit and no longer. A long permit released leaves the set to expire
// with the short one still there; once that one's holder has died, the
// name is free for a lease at once, and no key of the name is left.
func TestSetDiesWithItsLastPermit(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	long, err := p.Acquire(ctx, "set", 2, lease.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	short := 500 * time.Millisecond
	// Without renewal, as if its process died after acquiring.
	dead, err := p.Acquire(ctx, "set", 2, lease.WithTTL(short), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// (The fence counter may live on for the released permit's TTL: it
	// keeps nobody out, and S5 re-seeds it from the clock when it is gone.)
	for _, k := range []string{"tenure:{set}", "tenure:{set}:permits"} {
		if ttl := raw.PTTL(ctx, k).Val(); ttl > short {
			t.Errorf("%s lives %v after the long permit's release; the latest live permit has at most %v", k, ttl, short)
		}
	}
	<-dead.Done()
	// A lease of the name gets in once the dead permit's TTL has passed,
	// not when the released one's would have.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := m.Acquire(wctx, "set")
	if err != nil {
		t.Fatalf("a lease after the last permit expired: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{set}", "tenure:{set}:permits").Val(); n != 0 {
		t.Fatalf("%d keys of the semaphore outlived its last permit", n)
	}
}

// Releasing the last permit deletes the set and its fences at once,
// whatever TTL the permits had.
func TestLastReleaseDeletesTheSet(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	var held []*lease.Lease
	for _, ttl := range []time.Duration{time.Minute, 10 * time.Minute} {
		l, err := p.Acquire(ctx, "gone", 3, lease.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := raw.Exists(ctx, "tenure:{gone}", "tenure:{gone}:permits").Val(); n != 0 {
		t.Fatalf("%d keys of the semaphore outlived the release of its last permit", n)
	}
}

// A request that raises n goes at once, even while requests of the same
// manager with a smaller n wait: it may find a permit that they cannot.
func TestRaisingNGoesAheadOfSmallerWaiters(t *testing.T) {
	srv := redistest.Start(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Acquire(ctx, "grow", 1); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	waiting := make(chan error, 1)
	go func() {
		_, err := p.Acquire(wctx, "grow", 1)
		waiting <- err
	}()
	waitUntil(t, func() bool {
		return srv.Client(t).PubSubNumSub(ctx, "tenure:{grow}:released").Val()["tenure:{grow}:released"] > 0
	})
	start := time.Now()
	l, err := p.Acquire(ctx, "grow", 5, semaphore.WithResize(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("n=5 acquired in %v beside a waiting n=1 request", time.Since(start))
	select {
	case err := <-waiting:
		t.Fatalf("the n=1 waiter ended (%v) before the n=5 request got in", err)
	default:
	}
	_ = l.Release(ctx)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
	}
}

// S6 for permits and read locks: no key of a name outlives its last holder
// and waiter by more than a TTL, whatever TTLs its permits had, whether
// they were released or their holders died, and whether fair waiters gave
// up; and the keys that keep others out (the set and its fences) live no
// longer than the latest live permit.
func TestNoKeyOutlivesItsPermits(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ttl, longTTL := 300*time.Millisecond, 2*time.Second
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	p, rw := semaphore.New(m), rwlock.New(m)
	ctx := context.Background()
	setLivesAtMost := func(name string) {
		t.Helper()
		for _, k := range []string{"tenure:{" + name + "}", "tenure:{" + name + "}:permits"} {
			if left := raw.PTTL(ctx, k).Val(); left > ttl {
				t.Errorf("%s lives %v, past its latest live permit (at most %v)", k, left, ttl)
			}
		}
	}
	for i := range 20 {
		name := fmt.Sprintf("pool:%d", i)
		long, err := p.Acquire(ctx, name, 3, lease.WithTTL(longTTL))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Acquire(ctx, name, 3, lease.WithAutoRenew(false)); err != nil { // dies
			t.Fatal(err)
		}
		if err := long.Release(ctx); err != nil {
			t.Fatal(err)
		}
		setLivesAtMost(name)
	}
	// Read locks: a long one released, a short one whose holder died, and
	// a writer that gave up waiting behind them.
	long, err := rw.RLock(ctx, "doc", lease.WithTTL(longTTL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.RLock(ctx, "doc", lease.WithAutoRenew(false)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = rw.Lock(wctx, "doc")
	cancel()
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	setLivesAtMost("doc")
	// A fair permit waiter that gives up.
	full, err := p.Acquire(ctx, "full", 1, lease.WithTTL(longTTL))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = p.Acquire(wctx, "full", 1, lease.WithFair(true))
	cancel()
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a fair waiter on a full semaphore: %v", err)
	}
	if err := full.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil { // waits for the queue's clean-up
		t.Fatal(err)
	}
	// The fence counters and release markers may live as long as the
	// longest holder's TTL (S5 re-seeds a counter from the clock).
	redistest.WaitNoKeys(t, raw, longTTL)
}
