package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Every error of package lease starts with "lease: " once, and a sentinel
// wrapped inside another ("not held" because "lost") does not repeat it;
// errors.Is still finds both.
func TestErrorsCarryOnePrefix(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Minute))
	ctx := context.Background()
	check := func(what string, err error, is ...error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "lease: ") || strings.Count(msg, "lease: ") != 1 || strings.Contains(msg, "tenure: ") {
			t.Errorf("%s: %q: want the prefix \"lease: \" once and no other", what, msg)
		}
		for _, target := range is {
			if !errors.Is(err, target) {
				t.Errorf("%s: %q does not match %v", what, msg, target)
			}
		}
	}

	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.TryAcquire(ctx, "job")
	check("TryAcquire of a held name", err, lease.ErrNotAcquired)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = m.Acquire(wctx, "job")
	cancel()
	check("Acquire that timed out", err, lease.ErrNotAcquired, context.DeadlineExceeded)

	raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
	_, err = l.Exec(ctx, func(redis.Pipeliner) error { return nil })
	check("Exec after a takeover", err, lease.ErrLost)
	check("Extend after the loss", l.Extend(ctx, time.Minute), lease.ErrNotHeld, lease.ErrLost)
	check("Release after the loss", l.Release(ctx), lease.ErrNotHeld, lease.ErrLost)

	l, err = m.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenure:{other}")
	check("Release that finds the key gone", l.Release(ctx), lease.ErrNotHeld, lease.ErrLost)
	check("Do whose release finds a takeover", m.Do(ctx, "do", func(context.Context) error {
		raw.Set(ctx, "tenure:{do}", "intruder", time.Minute)
		return nil
	}), lease.ErrLost)
	_, err = m.TryAcquire(ctx, "")
	check("an empty name", err, lease.ErrInvalidName)
	_, err = lease.New(raw, lease.WithTTL(time.Millisecond))
	check("a TTL below the minimum", err, lease.ErrInvalidOption)
}
