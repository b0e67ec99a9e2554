package semaphore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

// wantMismatch fails the test unless err is the refusal of a request that
// asked wanted while the permits of name are held under held.
func wantMismatch(t *testing.T, err error, name string, held, wanted int) {
	t.Helper()
	var le *semaphore.LimitError
	switch {
	case !errors.Is(err, semaphore.ErrLimitMismatch):
		t.Fatalf("n=%d beside permits held under n=%d: %v; want ErrLimitMismatch", wanted, held, err)
	case !errors.As(err, &le) || le.Name != name || le.Held != held || le.Wanted != wanted:
		t.Fatalf("the mismatch error is %#v, want name %q held %d wanted %d", err, name, held, wanted)
	case errors.Is(err, lease.ErrNotAcquired):
		t.Fatalf("the mismatch error %v matches ErrNotAcquired: callers would wait or retry for nothing", err)
	}
}

// The first holder's n stands while permits are held: a request with
// another n fails at once, waiting or not, fair or not, and the same n
// works as before.
func TestMismatchedNIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		if _, err := p.Acquire(ctx, "builders", 2); err != nil {
			t.Fatal(err)
		}
	}
	_, err := p.TryAcquire(ctx, "builders", 3)
	wantMismatch(t, err, "builders", 2, 3)
	if want := `semaphore "builders" has n=2 while its permits are held; this request asked n=3`; err.Error() != want {
		t.Errorf("the error says %q, want %q", err, want)
	}
	// Acquire does not wait for what waiting cannot bring: it fails before
	// its (long) context ends, fair or barging.
	_, err = p.Acquire(ctx, "builders", 3)
	wantMismatch(t, err, "builders", 2, 3)
	_, err = p.Acquire(ctx, "builders", 1, lease.WithFair(true))
	wantMismatch(t, err, "builders", 2, 1)
	err = p.Do(ctx, "builders", 3, func(context.Context) error { return nil })
	wantMismatch(t, err, "builders", 2, 3)
	if ctx.Err() != nil {
		t.Fatal("the refused requests waited for their context to end")
	}
	// A refused fair request never joined the queue.
	if n := raw.Exists(ctx, "tenure:{builders}:queue").Val(); n != 0 {
		t.Error("a refused fair request left the queue behind")
	}
	// The same n: full, as before.
	if _, err := p.TryAcquire(ctx, "builders", 2); !errors.Is(err, lease.ErrNotAcquired) || errors.Is(err, semaphore.ErrLimitMismatch) {
		t.Fatalf("a third permit of 2: %v; want ErrNotAcquired alone", err)
	}
	// A lease's acquire refuses the option.
	m := newManager(t, srv.Client(t))
	if _, err := m.TryAcquire(ctx, "other", semaphore.WithResize(true)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("a lease with WithResize: %v; want ErrInvalidOption", err)
	}
}

// The stored n dies with the last permit: released, or expired without a
// release; a new set takes its first requester's n.
func TestNewNOnceNoPermitIsHeld(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("released", func(t *testing.T) {
		l, err := p.Acquire(ctx, "rel", 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l, err = p.TryAcquire(ctx, "rel", 3)
		if err != nil {
			t.Fatalf("n=3 after the last n=2 permit was released: %v", err)
		}
		_, err = p.TryAcquire(ctx, "rel", 2)
		wantMismatch(t, err, "rel", 3, 2)
		_ = l.Release(ctx)
	})

	t.Run("expired", func(t *testing.T) {
		// Its holder dies: no renewal, no release.
		dead, err := p.Acquire(ctx, "exp", 2, lease.WithTTL(300*time.Millisecond), lease.WithAutoRenew(false))
		if err != nil {
			t.Fatal(err)
		}
		<-dead.Done()
		waitUntil(t, func() bool { return raw.Exists(ctx, "tenure:{exp}", "tenure:{exp}:permits").Val() == 0 })
		l, err := p.TryAcquire(ctx, "exp", 3)
		if err != nil {
			t.Fatalf("n=3 after the last n=2 permit expired: %v", err)
		}
		_, err = p.TryAcquire(ctx, "exp", 2)
		wantMismatch(t, err, "exp", 3, 2)
		_ = l.Release(ctx)
	})

	t.Run("expired but still stored", func(t *testing.T) {
		// The set outlives its permits on the server (as when a key's
		// expiry and a score part by a millisecond): what counts is the
		// live permits, and with none the stored n is dead.
		dead, err := p.Acquire(ctx, "stale", 2, lease.WithTTL(300*time.Millisecond), lease.WithAutoRenew(false))
		if err != nil {
			t.Fatal(err)
		}
		raw.PExpire(ctx, "tenure:{stale}", time.Minute)
		raw.PExpire(ctx, "tenure:{stale}:permits", time.Minute)
		<-dead.Done()
		waitUntil(t, func() bool {
			now := raw.Time(ctx).Val().UnixMilli()
			return raw.ZCount(ctx, "tenure:{stale}", "-inf", strconv.FormatInt(now, 10)).Val() == 1
		})
		l, err := p.TryAcquire(ctx, "stale", 3)
		if err != nil {
			t.Fatalf("n=3 beside an expired n=2 permit still in the set: %v", err)
		}
		_ = l.Release(ctx)
	})
}

// Resizing up lets more in at once; down, it revokes nothing, and admits
// nobody until fewer than the new n are held.
func TestResize(t *testing.T) {
	srv := redistest.Start(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var held []*lease.Lease
	for range 2 {
		l, err := p.Acquire(ctx, "grow", 2)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	third, err := p.TryAcquire(ctx, "grow", 3, semaphore.WithResize(true))
	if err != nil {
		t.Fatalf("resizing 2 -> 3 with 2 held: %v", err)
	}
	held = append(held, third)
	_, err = p.TryAcquire(ctx, "grow", 2)
	wantMismatch(t, err, "grow", 3, 2)
	if _, err := p.TryAcquire(ctx, "grow", 3); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a fourth permit of 3: %v", err)
	}

	// Down to 1 with 3 held: the resizing request waits, the holders keep
	// their permits, and it gets in only after the last of them lets go.
	got := make(chan error, 1)
	go func() {
		l, err := p.Acquire(ctx, "grow", 1, semaphore.WithResize(true))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitUntil(t, func() bool {
		_, err := p.TryAcquire(ctx, "grow", 3)
		return errors.Is(err, semaphore.ErrLimitMismatch)
	})
	for i, l := range held {
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("holder %d lost its permit when n went down: %v", i, err)
		}
		if _, err := p.TryAcquire(ctx, "grow", 1); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a permit of 1 with %d held: %v", len(held)-i, err)
		}
		select {
		case err := <-got:
			t.Fatalf("the resizing request ended (%v) with %d permits still held", err, len(held)-i)
		default:
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("the resizing request after the last holder let go: %v", err)
	}
}

// A waiter that asked while permits were held under its n, and finds them
// held under another when it tries again, fails then, and leaves the fair
// queue. (A resize changes n here while a permit stays held throughout, so
// that the waiter cannot slip in between; a set emptied and taken anew
// under another n meets the waiter's next attempt the same way.)
func TestWaiterFindsAnotherN(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "barging", true: "fair"}[fair], func(t *testing.T) {
			srv := redistest.Start(t)
			raw := srv.Client(t)
			a := semaphore.New(newManager(t, srv.Client(t)))
			w := semaphore.New(newManager(t, srv.Client(t)))
			b := semaphore.New(newManager(t, srv.Client(t)))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := a.Acquire(ctx, "pool", 1); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				_, err := w.Acquire(ctx, "pool", 1, lease.WithFair(fair))
				got <- err
			}()
			waitUntil(t, func() bool {
				return raw.PubSubNumSub(ctx, "tenure:{pool}:released").Val()["tenure:{pool}:released"] > 0
			})
			// n goes to 2. Beside a fair waiter the barging resize is not
			// granted (it waits behind the queue), but n is stored anyway.
			_, err := b.TryAcquire(ctx, "pool", 2, semaphore.WithResize(true))
			if fair != (err != nil) {
				t.Fatalf("resizing beside a waiter (fair %v): %v", fair, err)
			}
			raw.Publish(ctx, "tenure:{pool}:released", "released")
			wantMismatch(t, <-got, "pool", 2, 1)
			waitUntil(t, func() bool { return raw.ZCard(ctx, "tenure:{pool}:queue").Val() == 0 })
		})
	}
}

// A read-write lock's readers are permits under one n of their own, so they
// never disagree among themselves; a semaphore of the same name with
// another n is refused while readers hold it, and a writer still waits for
// every reader.
func TestReadersKeepTheirN(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	rw, p := rwlock.New(m), semaphore.New(m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var readers []*lease.Lease
	for range 3 {
		r, err := rw.TryRLock(ctx, "doc")
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	if _, err := p.TryAcquire(ctx, "doc", 2); !errors.Is(err, semaphore.ErrLimitMismatch) {
		t.Fatalf("a semaphore of 2 beside readers: %v", err)
	}
	if _, err := rw.TryLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	for _, r := range readers {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w, err := rw.TryLock(ctx, "doc")
	if err != nil {
		t.Fatalf("a writer after the readers left: %v", err)
	}
	_ = w.Release(ctx)
}
