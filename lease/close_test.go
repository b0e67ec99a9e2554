package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestCloseReleasesEverything(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var leases []*lease.Lease
	for i := range 50 {
		l, err := m.Acquire(ctx, fmt.Sprint("job-", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if context.Cause(l.Context()) != lease.ErrClosed {
			t.Fatalf("%s: cause %v", l.Name(), context.Cause(l.Context()))
		}
	}
	if keys := raw.Keys(ctx, "tenure:{*}").Val(); len(keys) != 0 {
		t.Fatalf("left %d lease keys after Close: %v", len(keys), keys[:1])
	}
	if _, err := m.Acquire(ctx, "job-0"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// goleak in TestMain checks that nothing is left running.
}

func TestCloseWakesWaiters(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	other := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, err := other.Acquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, "job")
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = m.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, lease.ErrClosed) {
			t.Fatalf("waiter got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
}

// Close waits for an acquire in flight; the lease it brings back is
// released, not leaked, and its caller gets ErrClosed.
func TestCloseDuringAcquireInFlight(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := srv.Client(t)
	m, err := lease.New(c, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	for _, cl := range []*redis.Client{raw, c} {
		if err := cl.Ping(bg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	srv.MustPause(t)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(bg, "job")
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire is on its way
	go func() {
		time.Sleep(300 * time.Millisecond)
		srv.MustResume(t)
	}()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire in flight during Close = %v", err)
	}
	if raw.Exists(bg, "tenure:{job}").Val() != 0 {
		t.Fatal("the lease acquired during Close was left on the server")
	}
}

// Close gives each batch of releases its own bound: a manager holding more
// leases than one round trip releases in its op timeout still frees them
// all. With the server paused, it stops at the first batch that goes
// unanswered and says, in one error, how many it left to their TTL.
func TestCloseManyLeases(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	const n = 2500 // three batches
	acquireAll := func(m *lease.Manager, prefix string) {
		t.Helper()
		for i := range n {
			if _, err := m.TryAcquire(ctx, fmt.Sprint(prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// An op timeout shorter than the whole release, longer than a batch's.
	m := newManager(t, srv.Client(t), lease.WithOpTimeout(time.Second))
	acquireAll(m, "many-")
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if keys := raw.Keys(ctx, "tenure:{many-*}").Val(); len(keys) != 0 {
		t.Fatalf("%d keys left after Close", len(keys))
	}

	p := newManager(t, srv.Client(t), lease.WithOpTimeout(200*time.Millisecond))
	acquireAll(p, "paused-")
	srv.MustPause(t)
	err := p.Close()
	srv.MustResume(t)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d leases not released", n, n)) || strings.Count(err.Error(), "release \"") != 1 {
		t.Fatalf("Close with the server paused: %v", err)
	}
}
