package rwlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// A writer downgrades to a read lock in one step: the write lock ends as
// released, the read lock has a larger fence, readers may join it, and no
// writer gets in before it is released.
func TestDowngrade(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Alone: readers may join the downgraded lock at once.
	w, err := a.Lock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Downgrade(ctx, w, lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(w.Context()); !errors.Is(cause, lease.ErrReleased) {
		t.Fatalf("the write lock ended with %v, want ErrReleased", cause)
	}
	if r.Fence() <= w.Fence() {
		t.Fatalf("read fence %d not above the write fence %d", r.Fence(), w.Fence())
	}
	if _, err := a.Downgrade(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("downgrading an ended write lock: %v, want ErrNotHeld", err)
	}
	if _, err := a.Downgrade(ctx, r); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("downgrading a read lock: %v, want ErrInvalidOption", err)
	}
	other, err := b.TryRLock(ctx, "doc")
	if err != nil {
		t.Fatalf("a reader beside the downgraded lock: %v", err)
	}
	if _, err := c.TryLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	// The read lock is renewed past its TTL of two seconds.
	first := raw.ZScore(ctx, "tenure:{doc}", r.Token()).Val()
	waitFor(t, func() bool { return raw.ZScore(ctx, "tenure:{doc}", r.Token()).Val() > first+1000 })
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	_ = other.Release(ctx)
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// With a writer waiting, and another trying all along: neither gets
	// in until the downgraded read lock is released.
	w, err = a.Lock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	var readerReleased, stop atomic.Bool
	waiter := make(chan error, 1)
	go func() {
		l, err := b.Lock(ctx, "doc")
		if err == nil {
			if !readerReleased.Load() {
				err = errors.New("the waiting writer got in beside the downgraded read lock")
			}
			_ = l.Release(ctx)
		}
		waiter <- err
	}()
	waitFor(t, func() bool { return raw.ZCard(ctx, "tenure:{doc}:queue").Val() == 1 })
	var slipped atomic.Int64
	tried := make(chan struct{})
	go func() {
		defer close(tried)
		for !stop.Load() {
			if l, err := c.TryLock(ctx, "doc"); err == nil {
				slipped.Add(1)
				_ = l.Release(ctx)
			}
		}
	}()
	r, err = a.Downgrade(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if typ := raw.Type(ctx, "tenure:{doc}").Val(); typ != "zset" {
		t.Fatalf("after the downgrade the key is a %s", typ)
	}
	time.Sleep(100 * time.Millisecond) // give the writers their chance to break in
	stop.Store(true)
	<-tried
	if n := slipped.Load(); n > 0 {
		t.Fatalf("a writer got in %d times during the downgrade", n)
	}
	readerReleased.Store(true)
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

// Under latency, the downgrade's answer comes back long after the server
// ran it and let readers in: the write lock's context must end before
// the script is sent, so no reader, waiting or trying, is granted while
// the writer's context is live (S1). Judged by order: when a reader's
// acquisition returns, the write lock's context is already done.
func TestDowngradeEndsWriterBeforeReadersEnter(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	a := newLocker(t, slow, lease.WithTTL(10*time.Second), lease.WithOpTimeout(5*time.Second))
	b := newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	w, err := a.Lock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(300 * time.Millisecond)
	reader := func(take func() (*lease.Lease, error)) chan error {
		done := make(chan error, 1)
		go func() {
			r, err := take()
			if err != nil {
				done <- err
				return
			}
			select {
			case <-w.Done():
			default:
				err = errors.New("a reader was granted while the write lock's context was live")
			}
			_ = r.Release(ctx)
			done <- err
		}()
		return done
	}
	waiting := reader(func() (*lease.Lease, error) { return b.RLock(ctx, "doc") })
	var stop atomic.Bool
	defer stop.Store(true)
	trying := reader(func() (*lease.Lease, error) {
		for !stop.Load() {
			if r, err := b.TryRLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
				return r, err
			}
		}
		return nil, errors.New("stopped")
	})
	r, err := a.Downgrade(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	for _, done := range []chan error{waiting, trying} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// RDo and Do hold the lock while fn runs, release it after, and report a
// loss during fn.
func TestDo(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := a.RDo(ctx, "do", func(ctx context.Context) error {
		if l, ok := lease.FromContext(ctx); !ok || l.Name() != "do" {
			t.Error("fn's context carries no read lock of the name")
		}
		r, err := b.TryRLock(ctx, "do")
		if err != nil {
			return err
		}
		return r.Release(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Do(ctx, "do", func(ctx context.Context) error {
		if _, err := b.TryRLock(ctx, "do"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Errorf("a reader beside Do's writer: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.TryLock(ctx, "do")
	if err != nil {
		t.Fatalf("after Do: %v", err)
	}
	_ = w.Release(ctx)
	// A loss during fn: fn's context ends, and the error says so.
	err = a.RDo(ctx, "do", func(fctx context.Context) error {
		raw.Del(ctx, "tenure:{do}")
		<-fctx.Done()
		return nil
	}, lease.WithTTL(time.Second))
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("RDo after a loss: %v, want ErrLost", err)
	}
	if err := a.Do(ctx, "do", nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Do(nil): %v", err)
	}
}
