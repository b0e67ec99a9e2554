package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

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
	t.Logf("A cancelled %v before its local deadline", deadline.Sub(at))
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
	t.Logf("loss detected after %v (renewal interval %v)", time.Since(taken), interval)
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
	// Cancelled while the server was paused, before anyone could take the
	// name: the order is the property; how close to the deadline it came
	// is the chaos runner's to measure.
	// endedAt's AfterFunc runs in a goroutine of its own, which may not
	// have run yet when Done is closed.
	at, ok := ended()
	for wait := time.Now(); !ok && time.Since(wait) < 10*time.Second; at, ok = ended() {
		time.Sleep(time.Millisecond)
	}
	t.Logf("cancelled %v after the local deadline", at.Sub(deadline))
	if l.Err() != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
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
