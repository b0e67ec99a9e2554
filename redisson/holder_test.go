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
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestOptionsAreValidated(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	for name, opts := range map[string][]redisson.Option{
		"Go TTL above Java's":      {redisson.WithWatchdogTimeout(time.Minute)},
		"TTL too short":            {redisson.WithWatchdogTimeout(time.Millisecond)},
		"empty client id":          {redisson.WithClientID("")},
		"drift factor":             {redisson.WithDrift(1, 0)},
		"drift eats the TTL":       {redisson.WithDrift(0.9, 0)},
		"unknown sharding":         {redisson.WithSharding(redisson.Sharding(9))},
		"nil backoff":              {redisson.WithBackOff(nil)},
		"latch under 1ms":          {redisson.WithUnlockLatchTimeout(0)},
		"op timeout":               {redisson.WithOpTimeout(0)},
		"latch outliving the lock": {redisson.WithWatchdogTimeout(5 * time.Second), redisson.WithUnlockLatchTimeout(6 * time.Second)},
		"Java TTL too short":       {redisson.WithJavaWatchdogTimeout(time.Millisecond)},
		"Go above a short Java":    {redisson.WithJavaWatchdogTimeout(5 * time.Second), redisson.WithWatchdogTimeout(6 * time.Second)},
	} {
		if _, err := redisson.New(c, opts...); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	cl, err := redisson.New(c, redisson.WithJavaWatchdogTimeout(time.Minute), redisson.WithWatchdogTimeout(time.Minute))
	if err != nil {
		t.Fatalf("a Go TTL equal to Java's: %v", err)
	}
	defer cl.Close()
	for _, name := range []string{"", string([]byte{0xff}), string(make([]byte, redisson.MaxNameLen+1))} {
		if _, err := cl.GetLock(name).TryLock(context.Background()); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("name %q: %v, want ErrInvalidName", name, err)
		}
	}
}

// TestCancelledBeforeServerExpiry cuts a holder off from Redis: its
// context must end, with ErrLost, while the server still holds its field,
// so nobody else could have been let in yet.
// TestNewRefusesResendingClient: a client that resends a command whose
// reply was lost (go-redis's default MaxRetries, 3 retries) could run a
// lock script twice and count one entry twice: New refuses it, saying what
// to set.
func TestNewRefusesResendingClient(t *testing.T) {
	cluster := redistest.NewCluster(t, 3, 0)
	retrying := cluster.ClusterOptions()
	retrying.MaxRetries = 2
	for name, c := range map[string]redis.UniversalClient{
		"default":            redis.NewClient(&redis.Options{Addr: redisAddr}),
		"MaxRetries 3":       redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: 3}),
		"cluster MaxRetries": redis.NewClusterClient(retrying),
	} {
		_, err := redisson.New(c)
		if !errors.Is(err, lease.ErrInvalidOption) || !strings.Contains(err.Error(), "MaxRetries: -1") {
			t.Errorf("%s: %v, want ErrInvalidOption saying to set MaxRetries: -1", name, err)
		}
		_ = c.Close()
	}
	for name, c := range map[string]redis.UniversalClient{
		"MaxRetries -1":   redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1}),
		"cluster default": redis.NewClusterClient(cluster.ClusterOptions()), // its nodes do not retry
	} {
		cl, err := redisson.New(c)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else {
			_ = cl.Close()
		}
		_ = c.Close()
	}
}

func TestCancelledBeforeServerExpiry(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	// A drift of a fifth of the TTL: the margin between the local deadline
	// and the server's expiry is 200ms, far above a check's round trip.
	cl := newClient(t, c, redisson.WithWatchdogTimeout(time.Second), redisson.WithDrift(0.2, 0))
	ctx := bounded(t, 30*time.Second)
	h, err := cl.GetLock("cut").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole(true)
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("never cancelled")
	}
	held, err := admin.HExists(context.Background(), "cut", h.Field()).Result()
	if err != nil || !held {
		t.Fatalf("when the context ended the server no longer held the field (%v): cancelled after expiry", err)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	proxy.BlackHole(false)
	redistest.WaitNoKeys(t, admin, 2*time.Second)
}

// TestRenewalsMoveTheDeadline: each renewal is told on Renewals, with
// the deadline moved forward.
func TestRenewalsMoveTheDeadline(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	cl := newClient(t, c, redisson.WithWatchdogTimeout(time.Second))
	ctx := bounded(t, 30*time.Second)
	h, err := cl.GetLock("renewals").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := h.Deadline()
	for range 2 {
		select {
		case <-h.Renewals():
		case <-h.Done():
			t.Fatalf("lost: %v", context.Cause(h.Context()))
		case <-ctx.Done():
			t.Fatal("no renewal told")
		}
	}
	if !h.Deadline().After(first) {
		t.Fatalf("deadline %v not after the first %v", h.Deadline(), first)
	}
	_ = h.Unlock(ctx)
}

func TestExecWritesOnlyWhileHeld(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	cl := newClient(t, c)
	ctx := bounded(t, 30*time.Second)
	h, err := cl.GetLock("{exec}").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{exec}:balance", 10, time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, "{exec}:balance").Val(); v != "10" {
		t.Fatalf("balance %q", v)
	}
	// Taken away behind the holder's back (a Java admin's forceUnlock):
	// nothing is written, before the watchdog even noticed.
	if err := c.Del(ctx, "{exec}").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = h.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{exec}:balance", 20, time.Minute)
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec on a deleted lock: %v", err)
	}
	if v := c.Get(ctx, "{exec}:balance").Val(); v != "10" {
		t.Fatalf("balance %q written without the lock", v)
	}
	c.Del(ctx, "{exec}:balance")
	_ = h.Unlock(ctx)
}

func TestDoReportsLoss(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	cl := newClient(t, c, redisson.WithWatchdogTimeout(600*time.Millisecond))
	ctx := bounded(t, 30*time.Second)
	lk := cl.GetLock("do")
	ran := false
	if err := lk.Do(ctx, func(ctx context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("Do: %v (ran %v)", err, ran)
	}
	err := lk.Do(ctx, func(ctx context.Context) error {
		if _, err := lk.ForceUnlock(ctx); err != nil {
			return err
		}
		<-ctx.Done() // the watchdog finds the field gone
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do whose lock was taken away: %v, want ErrLost", err)
	}
}

func TestCloseReleasesAndTellsJava(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	cl, err := redisson.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t, 20*time.Second)
	h, err := cl.GetLock("closing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetLock("closing").Lock(h.Context()); err != nil {
		t.Fatal(err)
	}
	j := newJava(c, 30*time.Second)
	w := j.subscribe(ctx, t, "redisson_lock__channel:{closing}")
	defer w.close()
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, "closing").Val(); n != 0 {
		t.Fatal("Close left the hash")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrClosed) {
		t.Fatalf("cause %v", cause)
	}
	select {
	case <-w.msgs:
	case <-ctx.Done():
		t.Fatal("the Java waiter was not told")
	}
	if _, err := cl.GetLock("closing").TryLock(ctx); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("TryLock after Close: %v", err)
	}
}

func TestNilHold(t *testing.T) {
	var h *redisson.Hold
	if err := h.Unlock(context.Background()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
	if !errors.Is(h.Err(), lease.ErrNotHeld) || h.Context().Err() == nil || h.Token() != 0 {
		t.Fatal("a nil Hold looks held")
	}
	if _, err := h.Exec(context.Background(), nil); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
}

// TestEntryAfterUnnoticedLoss: the owner's field was deleted (a Java
// admin's forceUnlock) before the watchdog noticed, and the owner locks
// again: the new entry is a fresh hold, the old one is lost at once, and
// its Unlock cannot take the new entry back.
func TestEntryAfterUnnoticedLoss(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	cl := newClient(t, c) // 30s TTL: no renewal comes during the test
	ctx := bounded(t, 20*time.Second)
	owner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 5})
	lk := cl.GetLock("unnoticed")
	old, err := lk.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, "unnoticed").Err(); err != nil {
		t.Fatal(err)
	}
	fresh, err := lk.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(old.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("the old entry's cause %v, want ErrLost", cause)
	}
	if fresh.Err() != nil {
		t.Fatalf("the fresh entry: %v", fresh.Err())
	}
	if err := old.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the old entry's Unlock: %v, want ErrNotHeld", err)
	}
	if n, _ := c.HGet(ctx, "unnoticed", fresh.Field()).Int(); n != 1 {
		t.Fatalf("count %d after the old entry's Unlock, want the fresh entry's 1", n)
	}
	if err := fresh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTimedOutAcquireLeavesNoPhantom: an acquire whose reply does not come
// in time may still run on the server (docs/design.md S7): the owner takes
// back the entry it may have been given, so that nobody finds the name
// held by a phantom for a whole TTL.
func TestTimedOutAcquireLeavesNoPhantom(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	cl := newClient(t, c, redisson.WithOpTimeout(20*time.Second))
	ctx := context.Background()
	// Scripts loaded first, so that the acquire is one EVALSHA.
	h, err := cl.GetLock("phantom").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Unlock(ctx)

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = srv.Resume()
		}
	}()
	got := make(chan error, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := cl.GetLock("phantom").TryLock(tctx)
		got <- err // returns once the cleanup answered
	}()
	// The acquire is in the paused server's socket, its caller gone; the
	// server runs it on resuming, and the cleanup after it.
	time.Sleep(300 * time.Millisecond)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	select {
	case err := <-got:
		if !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("TryLock did not return")
	}
	if n := admin.Exists(ctx, "phantom").Val(); n != 0 {
		t.Fatalf("a phantom holds the name: %v", admin.HGetAll(ctx, "phantom").Val())
	}
}

// TestRefusalEndsTheWait: a name whose key is not a lock (a string, here)
// is a refusal that waiting does not change: Lock returns it at once
// rather than waiting until its context ends.
func TestRefusalEndsTheWait(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "not-a-lock", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, "not-a-lock")
	cl := newClient(t, c)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := cl.GetLock("not-a-lock").Lock(wctx)
	if !errors.Is(err, lease.ErrNotAcquired) || wctx.Err() != nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Lock on a string: %v (wait ended: %v)", err, wctx.Err())
	}
}
