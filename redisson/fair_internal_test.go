package redisson

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// TestFairLeavePassesWake: a fair waiter that gives up first in the queue
// while the lock is free (a release may have been published to it alone)
// sends '0' to the waiter behind it, and leaves the queue as Redisson's
// acquireFailed does: the waiters behind it move one wait earlier. The
// state is set up by hand: a live waiter would take the lock before it
// could be caught giving up there.
func TestFairLeavePassesWake(t *testing.T) {
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
	lk := cl.GetFairLock("leaving")
	_, key := lk.ownerKey(WithOwner(ctx, Owner{ThreadID: 1}))
	const behind = "java-uuid:7"
	c.RPush(ctx, queueKey(lk.raw), key.field, behind)
	c.ZAdd(ctx, timeoutKey(lk.raw), redisZ(1000, key.field), redisZ(2000, behind))
	ps := c.Subscribe(ctx, lk.Channel()+":"+behind)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	lk.leave(key, fairArgs{queue: true, wait: 300})
	select {
	case m := <-ps.Channel():
		if m.Payload != "0" {
			t.Fatalf("message %q", m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("the waiter behind heard nothing")
	}
	if q := c.LRange(ctx, queueKey(lk.raw), 0, -1).Val(); len(q) != 1 || q[0] != behind {
		t.Fatalf("queue %v", q)
	}
	if s := c.ZScore(ctx, timeoutKey(lk.raw), behind).Val(); s != 1700 {
		t.Fatalf("the waiter behind has timeout %v, want 2000 - 300", s)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
