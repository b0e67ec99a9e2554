package lease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// The TTL leaves room for a loaded machine: at 200ms, a run of the whole
// suite beside the other packages' tests on two cores lost the lease to a
// scheduler that did not run the watchdog for a TTL (a liveness matter,
// not this test's subject).
func TestRenewalKeepsLeaseAcrossTenTTLs(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ttl := 600 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	time.Sleep(10 * ttl)
	if l.Err() != nil {
		t.Fatalf("lost: %v", l.Err())
	}
	if !l.Deadline().After(first.Add(8 * ttl)) {
		t.Fatalf("deadline did not follow renewals: %v then %v", first, l.Deadline())
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl <= 0 {
		t.Fatalf("server TTL %v", pttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key left after release")
	}
	if context.Cause(l.Context()) != lease.ErrReleased {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second Release = %v", err)
	}
}

func TestNoRenewLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", lease.WithTTL(300*time.Millisecond), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, time.Second)
	if l.Err() != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
	}
	time.Sleep(50 * time.Millisecond)
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key outlived its TTL")
	}
}

func TestExtend(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", lease.WithTTL(time.Second), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl < 9*time.Second {
		t.Fatalf("server TTL %v after Extend(10s)", pttl)
	}
	if d := l.Deadline(); d.Before(before.Add(9*time.Second)) || d.After(time.Now().Add(10*time.Second)) {
		t.Fatalf("deadline %v", time.Until(d))
	}
	// A shorter TTL never shortens the lease on the server (S8).
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl < 9*time.Second {
		t.Fatalf("Extend(1s) shortened the server TTL to %v", pttl)
	}
	if err := l.Extend(ctx, time.Millisecond); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Extend(1ms) = %v", err)
	}
}

// The local deadline counts from when the acquire was sent, not answered.
func TestDeadlineCountsFromSend(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.SetLatency(150 * time.Millisecond) // each way
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	ttl := 2 * time.Second
	m := newManager(t, slow, lease.WithTTL(ttl))
	ctx := context.Background()
	if err := slow.Ping(ctx).Err(); err != nil { // connect first: dialling is not the request
		t.Fatal(err)
	}
	before := time.Now()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if after.Sub(before) < 300*time.Millisecond {
		t.Fatalf("round trip %v: the proxy added no latency", after.Sub(before))
	}
	drift := ttl/100 + 2*time.Millisecond
	if d := l.Deadline(); d.After(before.Add(ttl - drift + 20*time.Millisecond)) {
		t.Fatalf("deadline %v after send+ttl-drift: counted from the reply", d.Sub(before.Add(ttl-drift)))
	}
	if d := l.Deadline(); !d.Before(before.Add(ttl)) {
		t.Fatal("deadline not before send time + TTL")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// After SCRIPT FLUSH (or a restart that kept the data), renewal and release
// fall back from EVALSHA to EVAL and keep working.
func TestScriptFlushDoesNotBreakRenewal(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if l.Err() != nil {
		t.Fatalf("lost after SCRIPT FLUSH: %v", l.Err())
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("key left after release")
	}
}

// Extend that finds the lease taken over loses it at once, and touches
// nothing of the new holder.
func TestExtendFindsTakeover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(10*time.Second), lease.WithRenewInterval(3*time.Second))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "tenure:{job}", "intruder", 5*time.Second)
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Extend = %v", err)
	}
	if l.Err() != lease.ErrLost || context.Cause(l.Context()) != lease.ErrLost {
		t.Fatalf("Err %v", l.Err())
	}
	if pttl := raw.PTTL(ctx, "tenure:{job}").Val(); pttl > 5*time.Second || raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatalf("Extend touched the new holder's lease (TTL %v)", pttl)
	}
	// An explicit interval of 3s rules out a TTL that is not above 6s.
	l2, err := m.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Extend(ctx, 6*time.Second); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Extend below twice the interval = %v", err)
	}
}

// A TTL with a part below the millisecond reaches the server rounded up.
// Redis keeps keys to the millisecond, while the local deadline counts
// the TTL in full (S2): truncated, a TTL of 1s + 700us would keep the key
// 1000 ms, and with WithDrift(0, 0) another client could take the name
// before the first holder's deadline. MONITOR shows each TTL the scripts
// give the lock keys and the counters, at the acquisition (acquire.lua),
// at batched renewals (renew_leases.lua) and at an Extend (renew.lua):
// none may be below 1001 ms.
func TestTTLRoundedUpToWholeMilliseconds(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = time.Second + 700*time.Microsecond
	const least = 1001 // ms
	var renewed atomic.Int64
	hooks := lease.Hooks{Renewed: func(_ *lease.Lease, err error) {
		if err == nil {
			renewed.Add(1)
		}
	}}
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl), lease.WithDrift(0, 0), lease.WithHooks(hooks))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mon := srv.Monitor(t)
	// Two leases taken together renew in one batch.
	s, err := m.AcquireAll(ctx, []string{"r1", "r2"})
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); renewed.Load() < 6; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%d renewals in 30 s", renewed.Load())
		}
	}
	if err := s.Lease("r1").Extend(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range mon.Stop(t) {
		key, ms, ok := ttlGiven(c)
		if !ok || !strings.HasPrefix(key, "tenure:{r") {
			continue
		}
		seen[strings.ToLower(c.Args[0])]++
		if ms < least {
			t.Errorf("%q gave %s a TTL of %d ms, below the %v asked", c.Args, key, ms, ttl)
		}
	}
	if seen["set"] == 0 || seen["pexpire"] == 0 {
		t.Fatalf("TTLs seen: %v, want those of SET PX and of PEXPIRE", seen)
	}
}

// ttlGiven returns the key and the TTL in milliseconds that a script's
// SET ... PX or PEXPIRE gives, if c is one.
func ttlGiven(c redistest.Command) (key string, ms int64, ok bool) {
	if c.Client != "lua" || len(c.Args) < 3 {
		return "", 0, false
	}
	arg := ""
	switch strings.ToLower(c.Args[0]) {
	case "pexpire":
		arg = c.Args[2]
	case "set":
		for i := 3; i+1 < len(c.Args); i++ {
			if strings.EqualFold(c.Args[i], "px") {
				arg = c.Args[i+1]
			}
		}
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return c.Args[1], n, true
}
