package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/bridge"
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

// WithReleaseMemory: how long a release's marker lives, bounded by the
// lease's TTL, and none at all for 0.
func TestReleaseMemoryMarker(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if _, err := lease.New(c, lease.WithReleaseMemory(-time.Second)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("New with a negative release memory: %v, want ErrInvalidOption", err)
	}
	for _, tc := range []struct {
		name    string
		opts    []lease.Option
		ttl     time.Duration
		longest time.Duration // 0: no marker
	}{
		{"default", nil, time.Minute, 10 * time.Second},
		{"default-short-ttl", nil, 3 * time.Second, 3 * time.Second},
		{"2s", []lease.Option{lease.WithReleaseMemory(2 * time.Second)}, time.Minute, 2 * time.Second},
		{"above-ttl", []lease.Option{lease.WithReleaseMemory(time.Hour)}, 4 * time.Second, 4 * time.Second},
		{"none", []lease.Option{lease.WithReleaseMemory(0)}, time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, c, append(tc.opts, lease.WithTTL(tc.ttl))...)
			name := "memory-" + tc.name
			for _, limit := range []int{0, 2} { // a lease, then a permit
				var l *lease.Lease
				var err error
				if limit == 0 {
					l, err = m.TryAcquire(ctx, name)
				} else {
					l, err = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]().Permit(ctx, m, name, limit, 1, false, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				marker := "tenure:{" + name + "}:retired:" + l.Token()
				pttl := c.PTTL(ctx, marker).Val()
				switch {
				case tc.longest == 0 && pttl != -2*time.Nanosecond:
					t.Fatalf("limit %d: a marker (PTTL %v) with no release memory", limit, pttl)
				case tc.longest > 0 && (pttl <= 0 || pttl > tc.longest):
					t.Fatalf("limit %d: marker PTTL %v, want in (0, %v]", limit, pttl, tc.longest)
				}
			}
		})
	}
}
