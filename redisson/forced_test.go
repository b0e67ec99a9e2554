package redisson_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestJavaForceUnlockEndsHold: what Java's forceUnlock sends (DEL of the
// hash, then "0" on the lock's channel) ends a Go hold at once, at the
// default 30s watchdog, rather than at its next renewal 10s later. On a
// Cluster a Java client publishes with either kind (its sharded mode),
// and the holder hears both.
func TestJavaForceUnlockEndsHold(t *testing.T) {
	srv := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = srv.Close() })
	cluster := redistest.NewCluster(t, 3, 0).Client(t)
	for _, d := range []struct {
		name    string
		c       redis.UniversalClient
		publish string
	}{{"server", srv, "PUBLISH"}, {"cluster-classic", cluster, "PUBLISH"}, {"cluster-sharded", cluster, "SPUBLISH"}} {
		t.Run(d.name, func(t *testing.T) { javaForce(t, d.c, d.publish) })
	}
}

func javaForce(t *testing.T, c redis.UniversalClient, publish string) {
	ctx := bounded(t, 60*time.Second)
	cl := newClient(t, c)
	name := "jforce-" + uuid()
	sent := time.Now()
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstRenewal := sent.Add(redisson.DefaultWatchdogTimeout / 3)
	channel := "redisson_lock__channel:{" + name + "}"
	waitSubscribed(ctx, t, c, publish, channel)
	forced := time.Now()
	if err := c.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, publish, channel, "0").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the holder never noticed the force unlock")
	}
	ended := time.Now()
	t.Logf("the hold ended %v after the force", ended.Sub(forced))
	cause := context.Cause(h.Context())
	if !errors.Is(cause, lease.ErrLost) || !errors.Is(cause, redisson.ErrForceUnlocked) {
		t.Fatalf("cause %v, want ErrLost and ErrForceUnlocked", cause)
	}
	if !ended.Before(firstRenewal) {
		t.Fatalf("the hold ended at its first renewal (%v after it was taken), not at the message", ended.Sub(sent))
	}
}

// waitSubscribed waits until the holder listens on channel with the kind
// publish sends: so that the force is heard as a message, not found by
// the look a holder takes once its subscription is confirmed.
func waitSubscribed(ctx context.Context, t *testing.T, c redis.UniversalClient, publish, channel string) {
	t.Helper()
	count := func() int64 {
		cc, ok := c.(*redis.ClusterClient)
		switch {
		case publish == "SPUBLISH":
			return cc.PubSubShardNumSub(ctx, channel).Val()[channel]
		case ok:
			// A classic subscription lives on one node, any of them.
			var n atomic.Int64
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				n.Add(m.PubSubNumSub(ctx, channel).Val()[channel])
				return nil
			})
			return n.Load()
		}
		return c.PubSubNumSub(ctx, channel).Val()[channel]
	}
	for count() < 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("the holder never subscribed to %s (%s)", channel, publish)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestHoldersShareOneSubscription: every holder and waiter of a Client on
// one lock's channel shares one subscription, closed with the last.
func TestHoldersShareOneSubscription(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	name := "share-" + uuid()
	rw := cl.GetReadWriteLock(name)
	var holds []*redisson.Hold
	for range 5 {
		h, err := rw.ReadLock().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	channel := rw.ReadLock().Channel()
	numsub := func() int64 { return c.PubSubNumSub(ctx, channel).Val()[channel] }
	for numsub() != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d subscriptions on %s, want 1", numsub(), channel)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, h := range holds {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for numsub() != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d subscriptions on %s after the last unlock, want 0", numsub(), channel)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
