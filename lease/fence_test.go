package lease_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tenure-go/tenure/internal/redistest"
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
