package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

// AcquireN takes k permits together or none; its lease renews, releases and
// loses all k as one; Available counts them.
func TestAcquireNAllOrNone(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	const key = "tenure:{multi}"
	for _, k := range []int{0, -1, 6} {
		if _, err := p.TryAcquireN(ctx, "multi", 5, k); !errors.Is(err, lease.ErrInvalidOption) {
			t.Fatalf("k=%d of 5: %v, want ErrInvalidOption", k, err)
		}
	}
	if free, err := p.Available(ctx, "multi", 5); err != nil || free != 5 {
		t.Fatalf("Available of a free name: %d %v", free, err)
	}
	var singles []*lease.Lease
	for range 3 {
		l, err := p.TryAcquire(ctx, "multi", 5)
		if err != nil {
			t.Fatal(err)
		}
		singles = append(singles, l)
	}
	if _, err := p.TryAcquireN(ctx, "multi", 5, 3); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("3 with 2 free: %v, want ErrNotAcquired", err)
	}
	if n := raw.ZCard(ctx, key).Val(); n != 3 {
		t.Fatalf("a refused request for 3 left %d members, want the 3 singles'", n)
	}
	if err := singles[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	many, err := p.TryAcquireN(ctx, "multi", 5, 3, lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if many.Fence() <= singles[2].Fence() {
		t.Fatalf("fence %d not above the earlier %d", many.Fence(), singles[2].Fence())
	}
	if free, err := p.Available(ctx, "multi", 5); err != nil || free != 0 {
		t.Fatalf("Available with 5 of 5 held: %d %v", free, err)
	}
	if _, err := p.TryAcquire(ctx, "multi", 5); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a sixth permit: %v", err)
	}
	// The stored n counts, not the caller's.
	if free, err := p.Available(ctx, "multi", 9); err != nil || free != 0 {
		t.Fatalf("Available(9) under a stored n of 5: %d %v", free, err)
	}

	// Renewal renews all k: after several TTLs of one second they are all
	// live, with one score.
	first := raw.ZScore(ctx, key, many.Token()).Val()
	waitUntil(t, func() bool { return raw.ZScore(ctx, key, many.Token()).Val() > first+1500 })
	if many.Err() != nil {
		t.Fatal(many.Err())
	}
	score := raw.ZScore(ctx, key, many.Token()).Val()
	for _, m := range []string{many.Token() + "#2", many.Token() + "#3"} {
		if s := raw.ZScore(ctx, key, m).Val(); s != score {
			t.Fatalf("%s has score %v, the token %v: not renewed together", m, s, score)
		}
	}

	// Release frees all k at once.
	if err := many.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if free, err := p.Available(ctx, "multi", 5); err != nil || free != 3 {
		t.Fatalf("Available after releasing 3: %d %v, want 3", free, err)
	}

	// Loss is one loss: a takeover of the set ends the lease, with ErrLost.
	again, err := p.TryAcquireN(ctx, "multi", 5, 3, lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	raw.ZRem(ctx, key, again.Token())
	select {
	case <-again.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lease of 3 permits outlived its token")
	}
	if cause := context.Cause(again.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	for _, l := range singles[1:] {
		_ = l.Release(ctx)
	}

	// A lease of the name: nothing free.
	m := newManager(t, srv.Client(t))
	waitUntil(t, func() bool { return raw.Exists(ctx, key).Val() == 0 })
	l, err := m.TryAcquire(ctx, "multi")
	if err != nil {
		t.Fatal(err)
	}
	if free, err := p.Available(ctx, "multi", 5); err != nil || free != 0 {
		t.Fatalf("Available under a lease: %d %v", free, err)
	}
	_ = l.Release(ctx)
}

// A fair request for k is not starved by single requests: those behind it
// leave it room, and barging ones wait while it queues.
func TestFairAcquireNNotStarved(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := p.Acquire(ctx, "fair3", 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx, "fair3", 3)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	big := make(chan *lease.Lease, 1)
	go func() {
		l, err := p.AcquireN(ctx, "fair3", 3, 3, lease.WithFair(true))
		if err != nil {
			t.Error(err)
			close(big)
			return
		}
		order <- "three"
		big <- l
	}()
	waitUntil(t, func() bool { return raw.ZCard(ctx, "tenure:{fair3}:queue").Val() == 3 })
	small := make(chan *lease.Lease, 1)
	go func() {
		l, err := p.Acquire(ctx, "fair3", 3, lease.WithFair(true))
		if err != nil {
			t.Error(err)
			close(small)
			return
		}
		order <- "one"
		small <- l
	}()
	waitUntil(t, func() bool { return raw.ZCard(ctx, "tenure:{fair3}:queue").Val() == 4 })
	// One permit is free now, but promised to the request for three.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(ctx, "fair3", 3); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a barging request passed a queued one for 3: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-big
	if l == nil {
		return
	}
	if got := <-order; got != "three" {
		t.Fatalf("%q got in first: the single request behind passed the one for three", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s := <-small; s != nil {
		_ = s.Release(ctx)
	}
}

// A fair request for k that gives up leaves the queue with all its k places.
func TestAcquireNGivingUpLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	p := semaphore.New(newManager(t, srv.Client(t)))
	ctx := context.Background()
	a, err := p.Acquire(ctx, "leave3", 3)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.AcquireN(wctx, "leave3", 3, 3, lease.WithFair(true))
		done <- err
	}()
	waitUntil(t, func() bool { return raw.ZCard(ctx, "tenure:{leave3}:queue").Val() == 3 })
	stop()
	if err := <-done; !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	// The k places go in one script: once the token has left, so have
	// the others (the queue would forget them only after a while).
	waitUntil(t, func() bool { return raw.ZCard(ctx, "tenure:{leave3}:queue").Val() < 3 })
	if n := raw.ZCard(ctx, "tenure:{leave3}:queue").Val(); n != 0 {
		t.Fatalf("%d places of the request for 3 left in the queue", n)
	}
	// Nobody queues, so a barging request for one goes at once.
	l, err := p.TryAcquire(ctx, "leave3", 3)
	if err != nil {
		t.Fatalf("after the request for 3 left: %v", err)
	}
	_ = l.Release(ctx)
	_ = a.Release(ctx)
}

// WithCount(k) is AcquireN's k as an option, so that n and k cannot be
// swapped unnoticed: Acquire, TryAcquire and Do take k permits with it; it
// must agree with AcquireN's k, lie from 1 to n, and a lease refuses it.
func TestWithCount(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	p := semaphore.New(m)
	ctx := context.Background()
	two, err := p.Acquire(ctx, "wc", 3, semaphore.WithCount(2))
	if err != nil {
		t.Fatal(err)
	}
	if n := raw.ZCard(ctx, "tenure:{wc}").Val(); n != 2 {
		t.Fatalf("Acquire with WithCount(2) holds %d permits", n)
	}
	if free, err := p.Available(ctx, "wc", 3); err != nil || free != 1 {
		t.Fatalf("Available after 2 of 3: %d %v", free, err)
	}
	if _, err := p.TryAcquire(ctx, "wc", 3, semaphore.WithCount(2)); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("2 more of 3 with 1 free: %v, want ErrNotAcquired", err)
	}
	for _, tc := range []struct {
		what string
		try  func() (*lease.Lease, error)
	}{
		{"a count of 0", func() (*lease.Lease, error) { return p.TryAcquire(ctx, "wc", 3, semaphore.WithCount(0)) }},
		{"a count above n", func() (*lease.Lease, error) { return p.TryAcquire(ctx, "wc", 3, semaphore.WithCount(4)) }},
		{"AcquireN's k and another count", func() (*lease.Lease, error) {
			return p.TryAcquireN(ctx, "wc", 3, 1, semaphore.WithCount(2))
		}},
		{"a lease with a count", func() (*lease.Lease, error) { return m.TryAcquire(ctx, "plain", semaphore.WithCount(1)) }},
	} {
		if _, err := tc.try(); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", tc.what, err)
		}
	}
	if err := two.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = p.Do(ctx, "wc", 3, func(ctx context.Context) error {
		if n := raw.ZCard(ctx, "tenure:{wc}").Val(); n != 3 {
			return fmt.Errorf("Do with WithCount(3) holds %d permits", n)
		}
		return nil
	}, semaphore.WithCount(3))
	if err != nil {
		t.Fatal(err)
	}
	agree, err := p.TryAcquireN(ctx, "wc", 3, 2, semaphore.WithCount(2))
	if err != nil {
		t.Fatalf("AcquireN's k and the same count: %v", err)
	}
	_ = agree.Release(ctx)
}

// A request refused for want of permits says how many were free and how
// many it asked, even when the asker holds the others itself; one refused
// because a lease holds the name says so.
func TestRefusalSaysFreeAndAsked(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	p := semaphore.New(m)
	ctx := context.Background()
	if _, err := p.AcquireN(ctx, "pool", 3, 2); err != nil {
		t.Fatal(err)
	}
	const want = `"pool": 1 of its 3 permits free, 2 asked`
	_, err := p.TryAcquireN(ctx, "pool", 3, 2)
	if !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), want) {
		t.Fatalf("TryAcquireN(2 of 3) while holding 2: %v, want ErrNotAcquired saying %s", err, want)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = p.Acquire(wctx, "pool", 3, semaphore.WithCount(2))
	if !errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a wait for 2 of 3 that timed out: %v, want it to say %s", err, want)
	}
	if _, err := m.TryAcquire(ctx, "leased"); err != nil {
		t.Fatal(err)
	}
	_, err = p.TryAcquire(ctx, "leased", 3)
	if !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "held by a lease") {
		t.Fatalf("a permit of a leased name: %v, want it to say a lease holds it", err)
	}
}
