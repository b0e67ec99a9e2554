package redisson_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// sent are the commands docs/security.md lists for package redisson: what
// a Client sends itself, and what its scripts call.
var sent = map[string][]string{
	"client": {"HELLO", "CLIENT", "PING", "EVALSHA", "EVAL", "SUBSCRIBE", "UNSUBSCRIBE",
		"WATCH", "HEXISTS", "MULTI", "EXEC", "UNWATCH"},
	"lua": {"EXISTS", "HEXISTS", "INCR", "HINCRBY", "PEXPIRE", "PTTL", "GET", "SET", "DEL",
		"PUBLISH", "SPUBLISH", "HGET", "HSET", "HDEL", "HLEN", "HKEYS",
		// an RFairLock's queue
		"LINDEX", "LPOP", "RPUSH", "LRANGE", "LREM", "ZADD", "ZSCORE", "ZREM", "ZRANGE", "ZINCRBY",
		// an RPermitExpirableSemaphore's permits and timeouts
		"INCRBY", "DECRBY", "ZRANGEBYSCORE", "ZCOUNT"},
}

// TestCommandsAsDocumented runs every feature of the package under
// MONITOR and checks that it sends only what docs/security.md says.
func TestCommandsAsDocumented(t *testing.T) {
	srv := redistest.Start(t)
	mon := srv.Monitor(t)
	c := srv.Client(t)
	cl := newClient(t, c, redisson.WithWatchdogTimeout(time.Second))
	ctx := bounded(t, 30*time.Second)

	h, err := cl.GetFencedLock("{docs}").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := cl.GetFencedLock("{docs}").Lock(h.Context())
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		w, err := newClient(t, c).GetFencedLock("{docs}").Lock(ctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		waiter <- err
	}()
	waitSubscribers(t, c, "redisson_lock__channel:{docs}")
	select { // a renewal
	case <-h.Renewals():
	case <-ctx.Done():
		t.Fatal("no renewal")
	}
	if _, err := h.Exec(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "{docs}:x", 1, time.Second); return nil }); err != nil {
		t.Fatal(err)
	}
	_ = inner.Unlock(ctx)
	_ = h.Unlock(ctx)
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	rw := cl.GetReadWriteLock("rwdocs")
	r1, _ := rw.ReadLock().Lock(ctx)
	r2, _ := rw.ReadLock().Lock(ctx)
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	wl, err := rw.WriteLock().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteLock().ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := wl.Unlock(ctx); err == nil {
		t.Fatal("unlock after a force unlock succeeded")
	}
	if _, err := cl.GetLock("plain").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	fairDocs(t, c, cl)
	semDocs(t, c, cl)
	_ = cl.Close()

	cmds := mon.Stop(t)
	if len(cmds) < 20 {
		t.Fatalf("only %d commands seen", len(cmds))
	}
	for _, cmd := range cmds {
		if len(cmd.Args) == 0 || strings.EqualFold(cmd.Args[0], "monitor") {
			continue
		}
		name := strings.ToUpper(cmd.Args[0])
		who := "client"
		if cmd.Client == "lua" {
			who = "lua"
		}
		if name == "SET" && who == "client" && strings.HasPrefix(cmd.Args[1], "{docs}:") {
			continue // the command Exec's fn queued
		}
		if name == "PUBSUB" || name == "LLEN" || (name == "PEXPIRE" && who == "client") {
			continue // the test's own (waitSubscribers, waitQueueLen, semDocs)
		}
		if !slices.Contains(sent[who], name) {
			t.Errorf("%s sent %v, which docs/security.md does not list", who, cmd.Args)
		}
	}
}

// fairDocs runs an RFairLock's every script and every branch that sends
// a command of its own: a take; two waiters queued, the first of which
// gives up (those behind it move up) while the second is woken by the
// unlock and takes the lock (those behind it move up); a forced unlock.
func fairDocs(t *testing.T, c redis.UniversalClient, cl *redisson.Client) {
	t.Helper()
	ctx := bounded(t, 30*time.Second)
	const queue = "redisson_lock_queue:{fairdocs}"
	fair := cl.GetFairLock("fairdocs")
	h, err := fair.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gctx, giveUp := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { _, err := newClient(t, c).GetFairLock("fairdocs").Lock(gctx); gave <- err }()
	waitQueueLen(t, c, queue, 1)
	waiters := make(chan error, 2)
	for range 2 {
		go func() {
			w, err := newClient(t, c).GetFairLock("fairdocs").Lock(ctx)
			if err == nil {
				err = w.Unlock(ctx)
			}
			waiters <- err
		}()
	}
	waitQueueLen(t, c, queue, 3)
	giveUp()
	if err := <-gave; err == nil {
		t.Fatal("a waiter that gave up got the lock")
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-waiters; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fair.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fair.ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// semDocs runs an RPermitExpirableSemaphore's every script and every
// branch that sends a command of its own: permits set where none were and
// where some were, added, taken (with a TTL on the free permits to copy),
// waited for and released to the waiter; a permit expired and reclaimed
// by an acquire, another by AvailablePermits, a lease time updated, and a
// permit the Client's Close gives back.
func semDocs(t *testing.T, c redis.UniversalClient, cl *redisson.Client) {
	t.Helper()
	ctx := bounded(t, 30*time.Second)
	sem := cl.GetPermitExpirableSemaphore("semdocs")
	if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := sem.SetPermits(ctx, 1); err != nil { // the same: nothing to move
		t.Fatal(err)
	}
	if err := sem.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.AddPermits(ctx, -1); err != nil {
		t.Fatal(err)
	}
	c.PExpire(ctx, "semdocs", time.Minute) // the test's own: a TTL the timeouts copy
	p, err := sem.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		// Leased long, then cut short: an UpdateLeaseTime on a permit
		// whose 50ms had run out on a loaded machine would be refused.
		w, err := newClient(t, c).GetPermitExpirableSemaphore("semdocs").Acquire(ctx, time.Minute)
		if err == nil {
			err = w.UpdateLeaseTime(ctx, 50*time.Millisecond)
		}
		waiter <- err
	}()
	waitSubscribers(t, c, sem.Channel())
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	_, err = sem.Acquire(ctx, 50*time.Millisecond) // reclaims the waiter's once expired
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n, err := sem.AvailablePermits(ctx); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := sem.TryAcquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// waitQueueLen waits for queue to hold n waiters.
func waitQueueLen(t *testing.T, c redis.UniversalClient, queue string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); c.LLen(context.Background(), queue).Val() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d waiters", queue, n)
		}
	}
}
