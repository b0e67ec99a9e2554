package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

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
	// Hung, not slow: a loaded machine may take a while.
	if waited := time.Since(start); waited > 10*time.Second {
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
		if took := time.Since(start); took > 200*time.Millisecond+10*time.Second { // hung, not slow
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

// TestTryAcquireSaysSameManager: a lease request that finds its name held
// by a lease of the same manager says so (a lease is not reentrant), and
// no longer once that lease is released; another manager's is "another
// holder". Both said "is held by another holder".
func TestTryAcquireSaysSameManager(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	other := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.TryAcquire(ctx, "mine")
	if !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "held by this same manager") {
		t.Errorf("TryAcquire from the holding manager: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(wctx, "mine"); !strings.Contains(fmt.Sprint(err), "held by this same manager") {
		t.Errorf("Acquire from the holding manager, when its wait ends: %v", err)
	}
	_, err = other.TryAcquire(ctx, "mine")
	if !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "held by another holder") {
		t.Errorf("TryAcquire from another manager: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Acquire(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if _, err := m.TryAcquire(ctx, "mine"); strings.Contains(fmt.Sprint(err), "same manager") {
		t.Errorf("after its release, the manager still says it holds the name: %v", err)
	}
}
