package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// slowLink holds 10 leases of ttl through a proxy whose round trip then
// becomes rtt, for hold. With flush, the server's script cache is flushed
// every few seconds (each renewal after that pays EVALSHA, NOSCRIPT and
// EVAL). It fails if any lease is lost. (Re-dialed connections are
// modelled in package watchdog's TestSlowLinkKeepsLeases: forcing them
// here through ConnMaxLifetime measures go-redis's pool more than tenure.)
func slowLink(t *testing.T, ttl, rtt, hold time.Duration, flush bool) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m := newManager(t, c, lease.WithTTL(ttl))
	ctx := context.Background()
	var held []*lease.Lease
	for i := range 10 {
		l, err := m.TryAcquire(ctx, fmt.Sprint("slow-", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	time.Sleep(ttl)           // renewals have warmed the pipeline connections
	proxy.SetLatency(rtt / 2) // each way
	for end := time.Now().Add(hold); time.Now().Before(end); {
		time.Sleep(3 * ttl / 2)
		if err := raw.ScriptFlush(ctx).Err(); flush && err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range held {
		if err := l.Err(); err != nil {
			t.Errorf("%s lost at a %v round trip, TTL %v: %v", l.Name(), rtt, ttl, err)
		}
	}
	proxy.SetLatency(0)
	for _, l := range held {
		if err := l.Release(ctx); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			t.Error(err)
		}
	}
}

// L1 (docs/design.md, "Under stress"): a renewal that takes d keeps its
// lease while d is at most half of TTL minus drift and slack (1.46s at TTL
// 3s): the next renewal, due an interval after this one was sent, goes out
// when this one answers. At TTL 3s a 600ms round trip lost all ten leases
// within 6s when renewals were given up at half the interval (go-redis
// dropped each connection, and each retry dialed again). Here with a cold
// script cache: two round trips, 1.2s.
func TestSlowLinkKeepsLeases(t *testing.T) {
	slowLink(t, 3*time.Second, 600*time.Millisecond, 12*time.Second, true)
}

// The cold-cache case at a short TTL: 600ms (interval 200ms) at an 80ms
// round trip, which a renewal given up at half the interval lost.
func TestSlowLinkKeepsShortLeases(t *testing.T) {
	slowLink(t, 600*time.Millisecond, 80*time.Millisecond, 8*time.Second, true)
}
