package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

var redisAddr string

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

func count(t *testing.T, raw *redis.Client, name, owner string) int64 {
	t.Helper()
	n, err := raw.HGet(context.Background(), "tenure:{"+name+"}", owner).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDepthTenWithAWaitingOwner(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k := reentrant.New(newManager(t, srv.Client(t)))
	other := reentrant.New(newManager(t, srv.Client(t)))
	ctx := context.Background()

	var locks []*reentrant.Lock
	first, err := k.Lock(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	locks = append(locks, first)
	owner := first.Owner()
	for depth := 2; depth <= 10; depth++ {
		lk, err := k.Lock(locks[len(locks)-1].Context(), "acct")
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if lk.Owner() != owner || lk.Fence() != first.Fence() {
			t.Fatalf("depth %d: owner %q fence %d, want %q %d", depth, lk.Owner(), lk.Fence(), owner, first.Fence())
		}
		locks = append(locks, lk)
		if got := count(t, raw, "acct", owner); got != int64(depth) {
			t.Fatalf("count in Redis %d at depth %d", got, depth)
		}
	}

	var got atomic.Pointer[reentrant.Lock]
	waited := make(chan error, 1)
	go func() {
		lk, err := other.Lock(ctx, "acct")
		got.Store(lk)
		waited <- err
	}()
	for depth := 10; depth >= 1; depth-- {
		time.Sleep(20 * time.Millisecond) // give the waiter every chance to cheat
		if got.Load() != nil {
			t.Fatalf("the other owner got the lock with %d entries still held", depth)
		}
		if got := count(t, raw, "acct", owner); got != int64(depth) {
			t.Fatalf("count in Redis %d, want %d", got, depth)
		}
		if err := locks[depth-1].Unlock(ctx); err != nil {
			t.Fatalf("unlock at depth %d: %v", depth, err)
		}
		if depth > 1 && locks[0].Err() != nil {
			t.Fatalf("outer lock ended at depth %d: %v", depth, locks[0].Err())
		}
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting owner did not get the lock after the tenth unlock")
	}
	lk := got.Load()
	if lk.Owner() == owner || lk.Fence() <= first.Fence() {
		t.Fatalf("second owner %q fence %d after %d", lk.Owner(), lk.Fence(), first.Fence())
	}
	for i, l := range locks {
		if !errors.Is(context.Cause(l.Context()), lease.ErrReleased) {
			t.Fatalf("lock %d context cause %v", i, context.Cause(l.Context()))
		}
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{acct}").Val(); n != 0 {
		t.Fatal("key left after the last unlock")
	}
}

func TestUnlockTwiceIsAnErrorNotANegativeCount(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k := reentrant.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	outer, err := k.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k.Lock(outer.Context(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	if got := count(t, raw, "n", outer.Owner()); got != 1 {
		t.Fatalf("count %d after a double unlock of the inner lock, want 1", got)
	}
	if outer.Err() != nil {
		t.Fatalf("outer ended: %v", outer.Err())
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second Unlock = %v", err)
	}
}

func TestLeaseAndReentrantLockExcludeEachOther(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	k := reentrant.New(newManager(t, srv.Client(t)))
	ctx := context.Background()

	l, err := m.TryAcquire(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.TryLock(ctx, "one"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryLock on a leased name = %v, want ErrNotAcquired", err)
	}
	if _, err := k.TryLock(reentrant.WithOwner(ctx, "job"), "one"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryLock with an owner on a leased name = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	lk, err := k.TryLock(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx, "one"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquire on a locked name = %v, want ErrNotAcquired", err)
	}
	// A waiting lease gets it when the lock is unlocked.
	done := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "one")
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLossCancelsEveryNestedContext(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	interval := 50 * time.Millisecond
	k := reentrant.New(newManager(t, srv.Client(t), lease.WithTTL(200*time.Millisecond), lease.WithRenewInterval(interval)))
	ctx := context.Background()
	outer, err := k.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k.Lock(outer.Context(), "n")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // renewed past its TTL
	if outer.Err() != nil || inner.Err() != nil {
		t.Fatalf("lost while renewed: %v %v", outer.Err(), inner.Err())
	}
	raw.Del(ctx, "tenure:{n}")
	for _, lk := range []*reentrant.Lock{outer, inner} {
		select {
		case <-lk.Done():
		case <-time.After(time.Second):
			t.Fatal("a nested context outlived the lock")
		}
		if !errors.Is(context.Cause(lk.Context()), lease.ErrLost) {
			t.Fatalf("cause %v", context.Cause(lk.Context()))
		}
	}
	if err := inner.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lock = %v", err)
	}
	if err := outer.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lock = %v", err)
	}
	// Locking under the dead context fails; under a fresh one it works.
	if _, err := k.Lock(inner.Context(), "n"); err == nil {
		t.Fatal("Lock under a cancelled lock context succeeded")
	}
	again, err := k.Lock(reentrant.WithOwner(ctx, outer.Owner()), "n")
	if err != nil {
		t.Fatal(err)
	}
	if again.Fence() <= outer.Fence() {
		t.Fatalf("fence %d after %d", again.Fence(), outer.Fence())
	}
	_ = again.Unlock(ctx)
}

func TestSharedOwnerAcrossManagers(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	a := reentrant.New(newManager(t, srv.Client(t)))
	b := reentrant.New(newManager(t, srv.Client(t)))
	c := reentrant.New(newManager(t, srv.Client(t)))
	ctx := reentrant.WithOwner(context.Background(), "job-42")
	la, err := a.Lock(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryLock(ctx, "batch")
	if err != nil {
		t.Fatalf("a second process of the same job: %v", err)
	}
	if lb.Fence() != la.Fence() {
		t.Fatalf("fence %d, want the first acquisition's %d", lb.Fence(), la.Fence())
	}
	if got := count(t, raw, "batch", "job-42"); got != 2 {
		t.Fatalf("count %d, want 2", got)
	}
	if _, err := c.TryLock(context.Background(), "batch"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("another owner: %v", err)
	}
	if err := la.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := count(t, raw, "batch", "job-42"); got != 1 {
		t.Fatalf("count %d, want 1", got)
	}
	if err := lb.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(context.Background(), "tenure:{batch}").Val() != 0 {
		t.Fatal("key left")
	}
}

func TestCloseReleasesNestedLocks(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	k := reentrant.New(m)
	ctx := reentrant.WithOwner(context.Background(), "shared")
	outer, err := k.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Lock(outer.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(outer.Context()), lease.ErrClosed) {
		t.Fatalf("cause %v", context.Cause(outer.Context()))
	}
	if raw.Exists(context.Background(), "tenure:{x}").Val() != 0 {
		t.Fatalf("Close left %v", raw.HGetAll(context.Background(), "tenure:{x}").Val())
	}
}

func TestInvalidOwner(t *testing.T) {
	srv := redistest.Start(t)
	k := reentrant.New(newManager(t, srv.Client(t)))
	for _, o := range []string{"", string(make([]byte, reentrant.MaxOwnerLen+1))} {
		if _, err := k.TryLock(reentrant.WithOwner(context.Background(), o), "n"); !errors.Is(err, reentrant.ErrInvalidOwner) {
			t.Fatalf("owner of %d bytes: %v", len(o), err)
		}
	}
	if _, err := k.TryLock(context.Background(), ""); !errors.Is(err, lease.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestExecAndFairModeOnAReentrantLock(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k := reentrant.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	lk, err := k.Lock(ctx, "acct", lease.WithFair(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k.Lock(lk.Context(), "acct", lease.WithFair(true))
	if err != nil {
		t.Fatalf("re-entry in fair mode: %v", err)
	}
	if _, err := inner.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "v:{acct}", "1", 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = inner.Unlock(ctx)
	if _, err := inner.Exec(ctx, func(p redis.Pipeliner) error { return nil }); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec through an unlocked Lock = %v", err)
	}
	raw.HSet(ctx, "tenure:{acct}", "intruder", 1) // another owner field; ours goes:
	raw.HDel(ctx, "tenure:{acct}", lk.Owner())
	if _, err := lk.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "v:{acct}", "2", 0)
		return nil
	}); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec after the owner's field went = %v", err)
	}
	if got := raw.Get(ctx, "v:{acct}").Val(); got != "1" {
		t.Fatalf("v = %q: a lost lock wrote", got)
	}
}

// S6: no key of a reentrant lock outlives its last owner by more than a
// TTL: not the hash, not the fencing counter, not the marker of the final
// release.
func TestNoKeyOutlivesItsLocks(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ttl := 300 * time.Millisecond
	k := reentrant.New(newManager(t, srv.Client(t), lease.WithTTL(ttl)))
	ctx := context.Background()
	for i := range 200 {
		lk, err := k.Lock(ctx, fmt.Sprintf("account:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A lock whose owner forgets it expires once renewal stops.
	if _, err := k.Lock(ctx, "forgotten", lease.WithAutoRenew(false)); err != nil {
		t.Fatal(err)
	}
	redistest.WaitNoKeys(t, raw, ttl)
}

// The last Unlock that finds the lock taken over reports the loss.
func TestUnlockFindingATakeoverIsALoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k := reentrant.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	outer, err := k.Lock(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k.Lock(outer.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenure:{acct}")
	raw.HSet(ctx, "tenure:{acct}", "intruder", 1)
	if err := outer.Unlock(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("last Unlock after a takeover = %v, want ErrLost", err)
	}
	if raw.HGet(ctx, "tenure:{acct}", "intruder").Val() != "1" {
		t.Fatal("Unlock touched another owner's lock")
	}
}

// A nil *Lock, what a failed Lock returns, never panics.
func TestNilLockNeverPanics(t *testing.T) {
	var lk *reentrant.Lock
	ctx := context.Background()
	if lk.Name() != "" || lk.Owner() != "" || lk.Fence() != 0 || !lk.Deadline().IsZero() {
		t.Fatal("a nil lock has a name, owner, fence or deadline")
	}
	<-lk.Done()
	for what, err := range map[string]error{"Err": lk.Err(), "Unlock": lk.Unlock(ctx), "cause": context.Cause(lk.Context())} {
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s = %v, want ErrNotHeld", what, err)
		}
	}
	if _, err := lk.Exec(ctx, func(redis.Pipeliner) error { return nil }); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Exec = %v", err)
	}
}
