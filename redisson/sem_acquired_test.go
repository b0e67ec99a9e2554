package redisson_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestAcquiredPermits: AcquiredPermits counts Go's and Java's permits, as
// Java's acquiredPermits(), and reclaims an expired one first.
func TestAcquiredPermits(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	name := "acquired-" + uuid()
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	acquired := func() int {
		t.Helper()
		n, err := sem.AcquiredPermits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := acquired(); n != 0 {
		t.Fatalf("%d acquired of a fresh semaphore", n)
	}
	p, err := sem.Acquire(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := j.semTry(ctx, name, 0); id == "" || err != nil {
		t.Fatalf("Java's tryAcquire: %q %v", id, err)
	}
	if n := acquired(); n != 2 {
		t.Fatalf("%d acquired, want Go's and Java's 2", n)
	}
	<-p.Done()
	for acquired() != 1 {
		select {
		case <-ctx.Done():
			t.Fatal("the expired Go permit was never reclaimed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n, err := sem.AvailablePermits(ctx); n != 2 || err != nil {
		t.Fatalf("available %d %v after the reclaim, want 2", n, err)
	}
}
