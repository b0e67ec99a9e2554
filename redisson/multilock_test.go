package redisson_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestMultiDeployments runs the scenarios of MultiLock and of the
// semaphore's operations on several permits on one server and on a
// three-primary Cluster, where a MultiLock's names live on several nodes.
func TestMultiDeployments(t *testing.T) {
	srv := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = srv.Close() })
	cluster := redistest.NewCluster(t, 3, 0).Client(t)
	for _, d := range []struct {
		name string
		c    redis.UniversalClient
	}{{"server", srv}, {"cluster", cluster}} {
		t.Run(d.name, func(t *testing.T) {
			for _, s := range []struct {
				name string
				run  func(*testing.T, redis.UniversalClient)
			}{
				{"MultiAllOrNone", testMultiAllOrNone},
				{"MultiOrder", testMultiOrder},
				{"MultiLoss", testMultiLoss},
				{"MultiWatchdog", testMultiWatchdog},
				{"MultiWaitsForJava", testMultiWaitsForJava},
				{"SemAcquireNJava", testSemAcquireNJava},
				{"SemAcquireNWaits", testSemAcquireNWaits},
				{"SemReleaseIDs", testSemReleaseIDs},
				{"SemLeaseTime", testSemLeaseTime},
			} {
				t.Run(s.name, func(t *testing.T) { s.run(t, d.c) })
			}
		})
	}
}

// multiNames returns n fresh names that sort in the order given.
func multiNames(prefix string, n int) []string {
	base := prefix + "-" + uuid()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%c", base, 'a'+i)
	}
	return names
}

// testMultiAllOrNone: with the middle name held by a Java client, a
// TryLock of a fenced, a plain and a fair lock, and a Lock whose context
// ends while it waits, each return an error wrapping
// lease.ErrNotAcquired that names the held name, and leave none of the
// other names held on the server.
func testMultiAllOrNone(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c)
	names := multiNames("multinone", 3)
	j := newJava(c, 30*time.Second)
	if ok, _, err := j.tryLock(ctx, names[1], 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m, err := cl.GetMultiLock(cl.GetFairLock(names[2]), cl.GetLock(names[1]), cl.GetFencedLock(names[0]))
	if err != nil {
		t.Fatal(err)
	}
	free := func(how string) {
		t.Helper()
		for _, n := range []string{names[0], names[2]} {
			if got := c.Exists(ctx, n).Val(); got != 0 {
				t.Fatalf("%s: %s is still held on the server: %v", how, n, c.HGetAll(ctx, n).Val())
			}
		}
		if got := c.HGetAll(ctx, names[1]).Val(); len(got) != 1 || got[j.field(1)] != "1" {
			t.Fatalf("%s: the Java holder's hash is %v", how, got)
		}
	}
	mh, err := m.TryLock(ctx)
	if err == nil || !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), names[1]) {
		t.Fatalf("TryLock with %s held by Java: %v, %v; want lease.ErrNotAcquired naming it", names[1], mh, err)
	}
	free("TryLock")
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	mh, err = m.Lock(wctx)
	if err == nil || !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), names[1]) {
		t.Fatalf("Lock whose ctx ended: %v, %v; want lease.ErrNotAcquired naming %s", mh, err, names[1])
	}
	free("Lock")
	if _, err := j.unlock(ctx, names[1], 1); err != nil {
		t.Fatal(err)
	}
	mh, err = m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mh.Holds()[0].Token() <= 0 {
		t.Fatalf("the fenced lock drew no token: %d", mh.Holds()[0].Token())
	}
	if err := mh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, names[0], names[1], names[2]).Val(); n != 0 {
		t.Fatalf("%d names left held after Unlock", n)
	}
}

// testMultiOrder: two MultiLocks over the same names given in opposite
// orders, of two Clients, take turns in parallel loops: both finish (no
// circular wait), and never overlap.
func testMultiOrder(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 60*time.Second)
	names := multiNames("multiorder", 3)
	sec := &overlap{t: t}
	const rounds = 15
	var wg sync.WaitGroup
	for i, order := range [][]string{{names[0], names[1], names[2]}, {names[2], names[1], names[0]}} {
		cl := newClient(t, c)
		m, err := cl.GetMultiLock(cl.GetLock(order[0]), cl.GetLock(order[1]), cl.GetLock(order[2]))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				mh, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("multi lock %d: %v", i, err)
					return
				}
				sec.enter(fmt.Sprintf("multi lock %d", i))
				if err := mh.Unlock(ctx); err != nil {
					t.Errorf("multi lock %d unlock: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := sec.turns.Load(); n != 2*rounds {
		t.Fatalf("%d turns, want %d", n, 2*rounds)
	}
}

// testMultiLoss: a name of a MultiHold force-unlocked by another client,
// or deleted (as a FLUSH would) with no message, ends the MultiHold's
// context with a cause wrapping lease.ErrLost that names it; Unlock then
// lets the other names go and says the lost one was not held.
func testMultiLoss(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithWatchdogTimeout(900*time.Millisecond))
	other := newClient(t, c)
	for _, how := range []string{"force", "delete"} {
		names := multiNames("multiloss-"+how, 3)
		m, err := cl.GetMultiLock(cl.GetLock(names[0]), cl.GetLock(names[1]), cl.GetLock(names[2]))
		if err != nil {
			t.Fatal(err)
		}
		mh, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if how == "force" {
			if ok, err := other.GetLock(names[1]).ForceUnlock(ctx); !ok || err != nil {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
		} else if err := c.Del(ctx, names[1]).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-mh.Done():
		case <-ctx.Done():
			t.Fatalf("%s: the MultiHold never noticed", how)
		}
		cause := mh.Err()
		if !errors.Is(cause, lease.ErrLost) || !strings.Contains(cause.Error(), names[1]) {
			t.Fatalf("%s: cause %v, want lease.ErrLost naming %s", how, cause, names[1])
		}
		if !errors.Is(context.Cause(mh.Context()), lease.ErrLost) {
			t.Fatalf("%s: context cause %v", how, context.Cause(mh.Context()))
		}
		if err := mh.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), names[1]) {
			t.Fatalf("%s: Unlock after a loss: %v, want lease.ErrNotHeld naming %s", how, err, names[1])
		}
		if n := c.Exists(ctx, names[0], names[2]).Val(); n != 0 {
			t.Fatalf("%s: %d of the names not lost are still held after Unlock", how, n)
		}
		if !errors.Is(mh.Err(), lease.ErrLost) {
			t.Fatalf("%s: Unlock replaced the cause: %v", how, mh.Err())
		}
	}
}

// testMultiWatchdog: a MultiHold over a fair, a fenced, a write and a
// read lock, with a 1s watchdog timeout, outlives several timeouts: the
// Client's watchdog renews every hold, each hash keeping a TTL on the
// server.
func testMultiWatchdog(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 60*time.Second)
	const ttl = time.Second
	cl := newClient(t, c, redisson.WithWatchdogTimeout(ttl))
	names := multiNames("multiwd", 4)
	m, err := cl.GetMultiLock(cl.GetFairLock(names[0]), cl.GetFencedLock(names[1]), cl.GetReadWriteLock(names[2]).WriteLock(),
		cl.GetReadWriteLock(names[3]).ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	mh, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for rounds := 0; rounds < 3 || time.Since(start) <= 3*ttl; rounds++ {
		for _, h := range mh.Holds() {
			select {
			case <-h.Renewals():
			case <-mh.Done():
				t.Fatalf("the MultiHold ended after %v: %v", time.Since(start), mh.Err())
			case <-ctx.Done():
				t.Fatalf("%s: no renewal", h.Name())
			}
		}
	}
	if err := mh.Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if pttl := c.PTTL(ctx, n).Val(); pttl <= 0 || pttl > ttl {
			t.Fatalf("%s: PTTL %v after three TTLs, want within %v", n, pttl, ttl)
		}
	}
	if err := mh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// testMultiWaitsForJava: a MultiLock waits for a name a Java client holds
// (holding the names before it), is woken by the Java release's message
// (an hour's backoff, a 30s TTL), and a Java client then finds every name
// held; the MultiHold's context re-enters every name.
func testMultiWaitsForJava(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	names := multiNames("multijava", 2)
	j := newJava(c, 30*time.Second)
	if ok, _, err := j.tryLock(ctx, names[1], 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m, err := cl.GetMultiLock(cl.GetLock(names[1]), cl.GetLock(names[0]))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var mh *redisson.MultiHold
	go func() {
		h, err := m.Lock(ctx)
		mh = h
		got <- err
	}()
	waitSubscribers(t, c, cl.GetLock(names[1]).Channel())
	if n := c.Exists(ctx, names[0]).Val(); n != 1 {
		t.Fatalf("the waiting MultiLock does not hold %s, taken first", names[0])
	}
	if _, err := j.unlock(ctx, names[1], 1); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("MultiLock after the Java release: %v (only its message could wake it)", err)
	}
	for _, n := range names {
		if ok, left, err := j.tryLock(ctx, n, 2); ok || left <= 0 || err != nil {
			t.Fatalf("Java tryLock of %s: %v %d %v, want held", n, ok, left, err)
		}
	}
	inner, err := m.TryLock(mh.Context())
	if err != nil {
		t.Fatalf("re-entry under the MultiHold's context: %v", err)
	}
	if held, err := m.IsHeldByOwner(mh.Context()); !held || err != nil {
		t.Fatalf("IsHeldByOwner = %v, %v", held, err)
	}
	for _, n := range names {
		if v := c.HGet(ctx, n, mh.Owner().Field()).Val(); v != "2" {
			t.Fatalf("%s: the owner's count %q after re-entry, want 2", n, v)
		}
	}
	if err := errors.Join(inner.Unlock(ctx), mh.Unlock(ctx)); err != nil {
		t.Fatal(err)
	}
	if err := mh.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a second Unlock: %v, want lease.ErrNotHeld", err)
	}
}

// TestGetMultiLockRefuses: no locks, a nil one, another Client's, two on
// one hash and a bad name are refused before any round trip, and so is a
// lease one of the locks cannot have; the order taken is by Key whatever
// the order given; a nil MultiHold does not panic.
func TestGetMultiLockRefuses(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl, other := newClient(t, c), newClient(t, c)
	for _, tc := range []struct {
		name  string
		locks []*redisson.Lock
		want  error
	}{
		{"none", nil, lease.ErrInvalidOption},
		{"nil", []*redisson.Lock{cl.GetLock("a"), nil}, lease.ErrInvalidOption},
		{"another Client's", []*redisson.Lock{cl.GetLock("a"), other.GetLock("b")}, lease.ErrInvalidOption},
		{"one name twice", []*redisson.Lock{cl.GetLock("a"), cl.GetLock("b"), cl.GetLock("a")}, lease.ErrInvalidOption},
		{"one hash, two kinds", []*redisson.Lock{cl.GetFairLock("a"), cl.GetLock("a")}, lease.ErrInvalidOption},
		{"both halves", []*redisson.Lock{cl.GetReadWriteLock("a").ReadLock(), cl.GetReadWriteLock("a").WriteLock()}, lease.ErrInvalidOption},
		{"bad name", []*redisson.Lock{cl.GetLock("a"), cl.GetLock("")}, lease.ErrInvalidName},
	} {
		if m, err := cl.GetMultiLock(tc.locks...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, m, err, tc.want)
		}
	}
	m, err := cl.GetMultiLock(cl.GetLock("c"), cl.GetFairLock("a"), cl.GetLock("b"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range m.Locks() {
		keys = append(keys, l.Key())
	}
	if strings.Join(keys, ",") != "a,b,c" {
		t.Fatalf("order %v, want by Key", keys)
	}
	rw, err := cl.GetMultiLock(cl.GetLock("a"), cl.GetReadWriteLock("b").WriteLock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryLockFor(context.Background(), time.Hour); !errors.Is(err, lease.ErrInvalidOption) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("a lease over the Java watchdog timeout for a write lock: %v", err)
	}
	var nilHold *redisson.MultiHold
	if !errors.Is(nilHold.Err(), lease.ErrNotHeld) || !errors.Is(nilHold.Unlock(context.Background()), lease.ErrNotHeld) ||
		nilHold.Context().Err() == nil || nilHold.Holds() != nil {
		t.Fatal("a nil MultiHold answered as if it held")
	}
}

// TestMultiLockForEndsFirst: a MultiHold taken with LockFor ends, with a
// cause wrapping lease.ErrLost, no later than its earliest hold's
// deadline; Close ends one with lease.ErrClosed and lets its names go.
func TestMultiLockForEndsFirst(t *testing.T) {
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	names := multiNames("multilease", 2)
	m, err := cl.GetMultiLock(cl.GetLock(names[0]), cl.GetLock(names[1]))
	if err != nil {
		t.Fatal(err)
	}
	mh, err := m.TryLockFor(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := mh.Deadline()
	for _, h := range mh.Holds() {
		if h.Deadline().Before(deadline) {
			t.Fatalf("Deadline %v after a hold's %v", deadline, h.Deadline())
		}
	}
	<-mh.Done()
	if !errors.Is(mh.Err(), lease.ErrLost) {
		t.Fatalf("cause %v at the lease's end, want lease.ErrLost", mh.Err())
	}
	mh, err = m.LockFor(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(mh.Err(), lease.ErrClosed) {
		t.Fatalf("cause %v after Close, want lease.ErrClosed", mh.Err())
	}
	if n := c.Exists(ctx, names[0], names[1]).Val(); n != 0 {
		t.Fatalf("%d names held after Close", n)
	}
}

// TestMultiLockStartsOver: a name a waiting Lock took first, lost while
// it waits for the next (force-unlocked, then past its TTL), is not
// handed over: Lock gives every name back and takes them again, so that
// the MultiHold it returns holds both.
func TestMultiLockStartsOver(t *testing.T) {
	const ttl = 900 * time.Millisecond
	ctx := bounded(t, 30*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c, redisson.WithWatchdogTimeout(ttl))
	names := multiNames("multiover", 2)
	j := newJava(c, 30*time.Second)
	if ok, _, err := j.tryLock(ctx, names[1], 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m, err := cl.GetMultiLock(cl.GetLock(names[0]), cl.GetLock(names[1]))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		mh  *redisson.MultiHold
		err error
	}
	got := make(chan result, 1)
	go func() {
		mh, err := m.Lock(ctx)
		got <- result{mh, err}
	}()
	waitSubscribers(t, c, cl.GetLock(names[1]).Channel())
	if ok, err := newClient(t, c).GetLock(names[0]).ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock of %s = %v, %v", names[0], ok, err)
	}
	time.Sleep(2 * ttl) // past the lost hold's local deadline, whatever noticed it
	if _, err := j.unlock(ctx, names[1], 1); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.mh.Err(); err != nil {
		t.Fatalf("Lock handed over a MultiHold with a lost name: %v", err)
	}
	for _, n := range names {
		if !c.HExists(ctx, n, r.mh.Owner().Field()).Val() {
			t.Fatalf("%s is not held by the MultiHold's owner on the server", n)
		}
	}
	if err := r.mh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
