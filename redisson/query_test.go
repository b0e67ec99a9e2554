package redisson_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// The queries see Java's holders as Go's: a lock a Java thread entered
// twice is locked, held twice by that thread's owner and by no other, and
// lives its Java watchdog time; a Go holder's count follows its entries;
// the read and write locks say which mode holds the name.
func TestQueries(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "queries-" + uuid()
	l := cl.GetLock(name)
	javaOwner := redisson.WithOwner(ctx, redisson.Owner{ClientID: j.id, ThreadID: 7})
	goOwner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 1})

	check := func(what string, locked bool, javaCount, goCount int64) {
		t.Helper()
		if got, err := l.IsLocked(ctx); err != nil || got != locked {
			t.Fatalf("%s: IsLocked = %v, %v; want %v", what, got, err, locked)
		}
		for _, o := range []struct {
			ctx  context.Context
			who  string
			want int64
		}{{javaOwner, "Java's thread", javaCount}, {goOwner, "Go's owner", goCount}, {ctx, "no owner", 0}} {
			if got, err := l.HoldCount(o.ctx); err != nil || got != o.want {
				t.Fatalf("%s: HoldCount of %s = %d, %v; want %d", what, o.who, got, err, o.want)
			}
			if got, err := l.IsHeldByOwner(o.ctx); err != nil || got != (o.want > 0) {
				t.Fatalf("%s: IsHeldByOwner of %s = %v, %v; want %v", what, o.who, got, err, o.want > 0)
			}
		}
	}
	check("free", false, 0, 0)
	if ttl, err := l.RemainingTTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("RemainingTTL of a free lock = %v, %v; want 0", ttl, err)
	}
	for range 2 {
		if ok, _, err := j.tryLock(ctx, name, 7); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	check("Java entered twice", true, 2, 0)
	if ttl, err := l.RemainingTTL(ctx); err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("RemainingTTL under Java = %v, %v; want in (0, 30s]", ttl, err)
	}
	for range 2 {
		if _, err := j.unlock(ctx, name, 7); err != nil {
			t.Fatal(err)
		}
	}
	check("Java left", false, 0, 0)
	h1, err := l.TryLock(goOwner)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := l.TryLock(goOwner)
	if err != nil {
		t.Fatal(err)
	}
	check("Go entered twice", true, 0, 2)
	if err := h2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("Go left once", true, 0, 1)
	if err := h1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("Go left", false, 0, 0)

	rw := cl.GetReadWriteLock("rw-queries-" + uuid())
	r, err := rw.ReadLock().TryLock(goOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rw.ReadLock().IsLocked(ctx); !got {
		t.Fatal("a read lock held by a reader is not locked")
	}
	if got, _ := rw.WriteLock().IsLocked(ctx); got {
		t.Fatal("a write lock is locked while only a reader holds the name")
	}
	if got, _ := rw.ReadLock().HoldCount(goOwner); got != 1 {
		t.Fatalf("the reader's HoldCount = %d, want 1", got)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rw.WriteLock().TryLock(goOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rw.WriteLock().IsLocked(ctx); !got {
		t.Fatal("a write lock held by a writer is not locked")
	}
	if got, _ := rw.ReadLock().IsLocked(ctx); got {
		t.Fatal("a read lock is locked while a writer holds the name")
	}
	if got, _ := rw.WriteLock().HoldCount(goOwner); got != 1 {
		t.Fatalf("the writer's HoldCount = %d, want 1", got)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
