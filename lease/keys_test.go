package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// S6: no key of a name outlives its last holder and waiter by more than a
// TTL: not the lease, not the fencing counter, not the release markers, not
// the fair queue, not the marker of an acquire given up.
func TestNoKeyOutlivesItsNames(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ttl := 300 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()

	for i := range 200 {
		l, err := m.Acquire(ctx, fmt.Sprintf("account:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Do, and a lease that is never released: it expires by its TTL once
	// renewal stops (here, with auto-renewal off).
	if err := m.Do(ctx, "do", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "forgotten", lease.WithAutoRenew(false)); err != nil {
		t.Fatal(err)
	}
	// Fair waiters that give up leave the queue; one that is granted the
	// name leaves it too.
	held, err := m.Acquire(ctx, "queued")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := m.Acquire(wctx, "queued", lease.WithFair(true))
		cancel()
		if !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("fair waiter on a held name: %v", err)
		}
	}
	granted := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "queued", lease.WithFair(true))
		if err == nil {
			err = l.Release(ctx)
		}
		granted <- err
	}()
	waitFor(t, 5*time.Second, func() bool { return c.Exists(ctx, "tenure:{queued}:queue").Val() == 1 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	// An acquire given up before its reply came is taken back, and leaves
	// a marker that refuses the request should it still arrive.
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.SetLatency(100 * time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	ms := newManager(t, slow, lease.WithTTL(ttl))
	actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = ms.TryAcquire(actx, "abandoned")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire through a slow proxy: %v, want a timeout", err)
	}
	if err := ms.Close(); err != nil { // waits for the clean-up round trip
		t.Fatal(err)
	}
	if k := c.Keys(ctx, "tenure:{abandoned}:retired:*").Val(); len(k) != 1 {
		t.Fatalf("marker of the abandoned acquire: %v", k)
	}

	redistest.WaitNoKeys(t, c, ttl)
}

// waitFor polls cond until it holds, failing after within.
func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
