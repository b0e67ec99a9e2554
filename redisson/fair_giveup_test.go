package redisson_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

// testFairJavaGivesUp: a Java fair waiter queued ahead of a Go waiter gives
// up (RedissonFairLock.acquireFailed); the next release is published to
// the Go waiter, now first, on its own channel, and gets it in. The Go
// waiter's backoff is an hour and the holder's TTL 30s, past the test's
// bound: only that message can wake it in time.
func testFairJavaGivesUp(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	holder := newJava(c, 30*time.Second)
	quitter := newJava(c, 30*time.Second)
	name := "fairjavagivesup-" + uuid()
	const wait = 5 * time.Minute
	if ok, _, err := holder.fairTry(ctx, name, 1, wait); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _, err := quitter.fairTry(ctx, name, 1, wait); ok || err != nil { // queues first
		t.Fatal(ok, err)
	}
	goField := cl.ID() + ":6"
	got := make(chan error, 1)
	go func() {
		h, err := cl.GetFairLock(name).Lock(redisson.WithOwner(ctx, redisson.Owner{ThreadID: 6}))
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	waitQueued(ctx, t, c, name, goField)
	waitSubscribers(t, c, cl.GetFairLock(name).Channel()+":"+goField)
	if q := queueOf(ctx, t, c, name); len(q) != 2 || q[0] != quitter.field(1) {
		t.Fatalf("queue %v, want the Java waiter first", q)
	}
	keys := fairKeys(name)[1:] // the queue and the timeouts
	if err := jFairAcquireFailed.Run(ctx, c, keys, quitter.field(1), wait.Milliseconds()).Err(); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	if q := queueOf(ctx, t, c, name); len(q) != 1 || q[0] != goField {
		t.Fatalf("queue %v after the Java waiter gave up, want only Go's", q)
	}
	if r, err := holder.fairUnlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatal(r, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Go waiter behind a Java waiter that gave up: %v (only the message on its channel could wake it in time)", err)
	}
	noFairKeys(ctx, t, c, name)
}
