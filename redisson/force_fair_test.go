package redisson_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/watchdog"
)

// TestJavaFairForceUnlockEndsHold: Java's RFairLock.forceUnlock deletes
// the hash and publishes only to the first waiter's own channel, or to no
// one when nobody waits, so the holder hears nothing on the lock's
// channel; a Go fair holder still ends before its first renewal (10s at
// the default 30s watchdog), with or without a waiter. The force is sent
// as Java sends it: Lock.ForceUnlock of another Client runs Redisson's own
// fair force script.
func TestJavaFairForceUnlockEndsHold(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	for _, waiter := range []bool{false, true} {
		name := map[bool]string{false: "no-waiter", true: "a-waiter"}[waiter]
		t.Run(name, func(t *testing.T) { fairForce(t, c, waiter) })
	}
}

func fairForce(t *testing.T, c redis.UniversalClient, waiter bool) {
	ctx := bounded(t, 60*time.Second)
	holder, java := newClient(t, c), newClient(t, c)
	name := "jfairforce-" + uuid()
	sent := time.Now()
	h, err := holder.GetFairLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstRenewal := sent.Add(redisson.DefaultWatchdogTimeout / 3)
	// Past listenAfter, so that the holder listens rather than looking
	// once at its start.
	waitSubscribed(ctx, t, c, "PUBLISH", "redisson_lock__channel:{"+name+"}")
	took := make(chan *redisson.Hold, 1)
	if waiter {
		go func() {
			w, err := java.GetFairLock(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			took <- w
		}()
		for c.LLen(ctx, "redisson_lock_queue:{"+name+"}").Val() == 0 {
			select {
			case <-ctx.Done():
				t.Fatal("the waiter never queued")
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	forced := time.Now()
	if ok, err := java.GetFairLock(name).ForceUnlock(ctx); err != nil || !ok {
		t.Fatalf("force unlock: %v %v", ok, err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the holder never noticed the force unlock")
	}
	ended := time.Now()
	t.Logf("the hold ended %v after the force", ended.Sub(forced))
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrLost) || !errors.Is(cause, redisson.ErrForceUnlocked) {
		t.Fatalf("cause %v, want ErrLost and ErrForceUnlocked", cause)
	}
	if !ended.Before(firstRenewal) {
		t.Fatalf("the hold ended at its first renewal (%v after it was taken), not at a look", ended.Sub(sent))
	}
	if waiter {
		if w := <-took; w != nil {
			_ = w.Unlock(ctx)
		}
	}
}

// TestLossSaysEachFactOnce: a hold lost to a renewal that found its field
// gone says the lock, its name, "watchdog" and the field once each (it
// said "redisson", the name and "watchdog" twice), and errors.Is still
// finds lease.ErrLost and watchdog's reason.
func TestLossSaysEachFactOnce(t *testing.T) {
	ctx := bounded(t, 60*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c, redisson.WithWatchdogTimeout(900*time.Millisecond))
	name := "lossonce-" + uuid()
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Taken away without a message: only a renewal finds it gone.
	if err := c.HDel(ctx, name, h.Field()).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the hold never ended")
	}
	cause := context.Cause(h.Context())
	if !errors.Is(cause, lease.ErrLost) || !errors.Is(cause, watchdog.ErrTakenOver) && !errors.Is(cause, redisson.ErrForceUnlocked) {
		t.Fatalf("cause %v, want lease.ErrLost and a renewal's or a look's reason", cause)
	}
	msg := cause.Error()
	t.Log(msg)
	for _, once := range []string{name, "watchdog", "redisson", h.Field()} {
		if n := strings.Count(msg, once); n > 1 {
			t.Errorf("%q said %d times in %q", once, n, msg)
		}
	}
}
