package redisson_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
)

// TestLockForFixedLease: LockFor is Redisson's lock(leaseTime): the hash
// gets the lease, is never renewed, and the hold's context ends at its
// local deadline, which precedes the server's expiry; a Java locker finds
// it held meanwhile.
func TestLockForFixedLease(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c, redisson.WithDrift(0.1, 0))
	j := newJava(c, 30*time.Second)
	name := "leased-" + uuid()
	const leaseTime = 1500 * time.Millisecond
	h, err := cl.GetLock(name).LockFor(ctx, leaseTime)
	if err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	pttl := time.Duration(c.PTTL(ctx, name).Val())
	if pttl <= 0 || pttl > leaseTime {
		t.Fatalf("PTTL %v, want at most the lease %v", pttl, leaseTime)
	}
	// The server keeps the hash until asked + pttl at least.
	if d := h.Deadline(); d.After(asked.Add(pttl)) {
		t.Fatalf("local deadline %v after the server's expiry %v", d, asked.Add(pttl))
	}
	if ok, _, err := j.tryLock(ctx, name, 1); ok || err != nil {
		t.Fatalf("a Java tryLock beside a leased Go hold: %v %v", ok, err)
	}
	select {
	case <-h.Renewals():
		t.Fatal("a fixed lease was renewed")
	case <-h.Done():
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost at the local deadline", cause)
	}
	for c.Exists(ctx, name).Val() == 1 {
		select {
		case <-ctx.Done():
			t.Fatal("the leased hash never expired")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestLeaseReentryRefused: an owner cannot enter with a fixed lease a lock
// it holds, nor enter a leased hold again: either would set the hash's TTL
// anew and could cut it short. TryLockFor of a held lock is not acquired.
func TestLeaseReentryRefused(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	lk := cl.GetLock("lease-reentry-" + uuid())
	octx := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 1})
	h, err := lk.LockFor(octx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, take := range []func(context.Context) (*redisson.Hold, error){
		lk.Lock, lk.TryLock,
		func(ctx context.Context) (*redisson.Hold, error) { return lk.LockFor(ctx, time.Second) },
	} {
		if _, err := take(octx); !errors.Is(err, redisson.ErrLeaseReentry) || !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a re-entry into a leased hold: %v, want ErrLeaseReentry", err)
		}
	}
	if _, err := lk.TryLockFor(ctx, time.Second); !errors.Is(err, lease.ErrNotAcquired) || errors.Is(err, redisson.ErrLeaseReentry) {
		t.Fatalf("another owner's TryLockFor: %v", err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h, err = lk.Lock(octx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.LockFor(octx, time.Second); !errors.Is(err, redisson.ErrLeaseReentry) {
		t.Fatalf("a leased entry into a renewed hold: %v, want ErrLeaseReentry", err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.LockFor(ctx, time.Millisecond); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("a 1ms lease: %v, want ErrInvalidOption", err)
	}
}

// TestUpgradeRefused: an owner holding the read lock asks for the write
// lock: ErrUpgrade at once (it would wait for itself until its context
// ended); once it unlocked the read lock, the write lock is its.
func TestUpgradeRefused(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	rw := cl.GetReadWriteLock("upgrade-" + uuid())
	r, err := rw.ReadLock().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Under the reader's context, which carries its owner, bounded: a
	// reader waiting for itself would end only there.
	wctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if _, err := rw.WriteLock().Lock(wctx); !errors.Is(err, redisson.ErrUpgrade) || !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a reader's write Lock: %v, want ErrUpgrade", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rw.WriteLock().Lock(redisson.WithOwner(ctx, r.Owner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHeldHereSaysSo: a second Lock of one Client with no owner in its
// context is a new owner: its refusal says that the name is held by this
// same Client, and under which owner.
func TestHeldHereSaysSo(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	lk := cl.GetLock("here-" + uuid())
	h, err := lk.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	for what, take := range map[string]func(context.Context) (*redisson.Hold, error){"TryLock": lk.TryLock, "Lock": lk.Lock} {
		_, err := take(wctx)
		if !errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, redisson.ErrHeldHere) || !strings.Contains(err.Error(), h.Field()) {
			t.Errorf("%s without an owner beside the Client's own hold: %v, want ErrHeldHere naming %s", what, err, h.Field())
		}
	}
	// Another Client's refusal says nothing of the kind.
	other := newClient(t, c)
	if _, err := other.GetLock(lk.Name()).TryLock(ctx); !errors.Is(err, lease.ErrNotAcquired) || errors.Is(err, redisson.ErrHeldHere) {
		t.Errorf("another Client's TryLock: %v", err)
	}
}
