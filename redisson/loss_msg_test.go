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
