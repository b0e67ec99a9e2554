package redisson

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// TestUnlockLatchAnswersACopy: an unlock resent with its request id (its
// reply lost) is answered from Redisson's latch key, not applied twice.
func TestUnlockLatchAnswersACopy(t *testing.T) {
	o := redistest.Start(t).Options()
	o.MaxRetries = -1 // New refuses a client that resends
	c := redis.NewClient(o)
	defer c.Close()
	cl, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lk := cl.GetLock("latched")
	h, err := lk.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Lock(h.Context()); err != nil {
		t.Fatal(err)
	}
	key := h.h.key
	for i := range 2 {
		res, err := cl.unlockOnce(ctx, key, "req-1")
		if err != nil || res != int64(0) {
			t.Fatalf("copy %d answered %v, %v; want 0 (still held)", i, res, err)
		}
	}
	if n, _ := c.HGet(ctx, "latched", h.Field()).Int(); n != 1 {
		t.Fatalf("count %d after one unlock sent twice, want 1", n)
	}
	if ttl := c.PTTL(ctx, "redisson_unlock_latch:{latched}:req-1").Val(); ttl <= 0 || ttl > DefaultUnlockLatchTimeout {
		t.Fatalf("latch PTTL %v", ttl)
	}
	// A shorter watchdog timeout bounds the latch too: no key of a lock
	// outlives its last holder by more than a TTL.
	short, err := New(c, WithWatchdogTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	sh, err := short.GetLock("latched-short").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.unlockOnce(ctx, sh.h.key, "req-2"); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, "redisson_unlock_latch:{latched-short}:req-2").Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("latch PTTL %v with a 1s watchdog timeout", ttl)
	}
	sh.h.mu.Lock()
	sh.h.count = 0 // unlocked behind the Hold's back above
	sh.h.mu.Unlock()
}
