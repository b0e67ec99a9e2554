package lease_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestFenceGrowsAcrossRestartWithoutPersistence(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	m := newManager(t, c)
	ctx := context.Background()
	var last int64
	for range 5 {
		l, err := m.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("restart kept %d keys: not a data-losing restart", n)
	}
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= last {
		t.Fatalf("fence %d after restart, not above %d", l.Fence(), last)
	}
}

// S5: fences strictly increase whatever data Redis comes back with. Here it
// comes back with an older snapshot: the counter it restores is below fences
// handed out since, and the next fence must still be above all of them.
func TestFenceGrowsAfterRestartFromOlderSnapshot(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	m := newManager(t, c)
	ctx := context.Background()
	var fences []int64
	cycle := func() {
		t.Helper()
		l, err := m.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, l.Fence())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		cycle()
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cycle()
	}
	srv.MustRestart(t) // SIGKILL, then start again: it loads the snapshot
	restored, err := c.Get(ctx, "tenure:{job}:fence").Int64()
	if err != nil {
		t.Fatalf("the snapshot's counter did not come back: %v", err)
	}
	last := slices.Max(fences)
	if restored >= last {
		t.Fatalf("restored counter %d is not older than the last fence %d: nothing was rolled back", restored, last)
	}
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= last {
		t.Fatalf("fence %d after a restart from an older snapshot (counter %d); fences before: %v", l.Fence(), restored, fences)
	}
}

// A held name keeps its fencing counter (the election's reader and the
// tenure command read it), although the watchdog's batched renewals leave
// the counter be for up to a TTL at a time (watchdog.Renewal.Light): the
// counter is given a TTL more than the lease whenever it is refreshed.
func TestHeldNameKeepsItsCounter(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	const ttl = time.Second
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()
	const n = 20 // renewed together: batched renewals
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("held-", i)
		l, err := m.Acquire(ctx, names[i])
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	var light bool // a sample that only a light renewal explains
	for end := time.Now().Add(6 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var lock, counter []*redis.DurationCmd
		if _, err := raw.TxPipelined(ctx, func(p redis.Pipeliner) error {
			lock, counter = nil, nil
			for _, name := range names {
				lock = append(lock, p.PTTL(ctx, "tenure:{"+name+"}"))
				counter = append(counter, p.PTTL(ctx, "tenure:{"+name+"}:fence"))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i, name := range names {
			l, c := lock[i].Val(), counter[i].Val()
			if l <= 0 {
				t.Fatalf("%s: lease gone (PTTL %v) while held", name, l)
			}
			if c <= 0 {
				t.Fatalf("%s: counter gone (PTTL %v) while the lease lives %v", name, c, l)
			}
			if c > l+ttl+50*time.Millisecond { // the keys' expiries are set a moment apart
				t.Fatalf("%s: counter lives %v, more than a TTL past the lease's %v (S6)", name, c, l)
			}
			// A full renewal leaves the counter a TTL past the lease; a
			// light one an interval (TTL/3) less. With renewals given
			// until their loss time, at most every other one is light.
			light = light || c < l+5*ttl/6
		}
	}
	if !light {
		t.Fatal("every sample had the counter a TTL past the lease: no light renewal seen")
	}
}
