package redisson_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// RedissonFairLock.tryLockInnerAsync (its EVAL_LONG flavour, 3.24+): a
// waiter that cannot take the lock queues in KEYS[2] with a timeout in
// KEYS[3], in its own clock (ARGV[4]).
var jFairLock = redis.NewScript(`
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local t = redis.call('zscore', KEYS[3], first)
  if t ~= false and tonumber(t) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), k)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`)

// RedissonFairLock.unlockInnerAsync (3.24+): the hash's last entry, or a
// hash already gone, publishes on the first waiter's own channel.
var jFairUnlock = redis.NewScript(`
local latched = redis.call('get', KEYS[5])
if latched ~= false then
  return tonumber(latched)
end
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local t = redis.call('zscore', KEYS[3], first)
  if t ~= false and tonumber(t) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  local next = redis.call('lindex', KEYS[2], 0)
  if next ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. next, ARGV[1])
  end
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then
  redis.call(ARGV[5], KEYS[4] .. ':' .. next, ARGV[1])
end
return 1`)

// RedissonFairLock.acquireFailedAsync: a waiter that gives up leaves the
// queue; those behind it move one wait earlier.
var jFairAcquireFailed = redis.NewScript(`
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
  i = i + 1
end
i = i + 1
while i <= #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
  i = i + 1
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])`)

// fairKeys are an RFairLock's hash, queue and timeouts.
func fairKeys(name string) []string {
	return []string{name, jPrefix("redisson_lock_queue", name), jPrefix("redisson_lock_timeout", name)}
}

// fairChannel is the channel thread's fair waiter listens on.
func (j *javaClient) fairChannel(name string, thread int64) string {
	return jPrefix("redisson_lock__channel", name) + ":" + j.field(thread)
}

// fairTry is one tryAcquire of RFairLock.lock() (wait: its threadWaitTime)
// or tryLock(wait): taken, or the wait Java's loop sleeps at most.
func (j *javaClient) fairTry(ctx context.Context, name string, thread int64, wait time.Duration) (bool, int64, error) {
	v, err := jFairLock.Run(ctx, j.c, fairKeys(name), j.ttl.Milliseconds(), j.field(thread), wait.Milliseconds(), time.Now().UnixMilli()).Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, v, err
}

// fairUnlock is RFairLock.unlock().
func (j *javaClient) fairUnlock(ctx context.Context, name string, thread int64) (int64, error) {
	keys := append(fairKeys(name), jPrefix("redisson_lock__channel", name), jPrefix("redisson_unlock_latch", name)+":"+uuid())
	return jFairUnlock.Run(ctx, j.c, keys, "0", j.ttl.Milliseconds(), j.field(thread), time.Now().UnixMilli(), j.publish, latchTimeout).Int64()
}

// fairLock is RFairLock.lock() with a threadWaitTime of wait: queue, listen
// on the thread's own channel, look again on each message or when the
// answered wait runs out. (Java's loop spins while the lock is free and
// another waiter first, its answer being 0: this one pauses 2ms there.)
func (j *javaClient) fairLock(ctx context.Context, t *testing.T, name string, thread int64, wait time.Duration) (int, error) {
	try := func() (bool, int64, error) {
		ok, w, err := j.fairTry(ctx, name, thread, wait)
		if err == nil && !ok && w == 0 {
			w = 2
		}
		return ok, w, err
	}
	return j.lock(ctx, t, name, thread, try, j.fairChannel(name, thread))
}

// TestRLockIsNoFairLock backs what docs/design.md section 13 says of a Go
// RLock on a name Java takes as an RFairLock: it excludes Java's fair
// holders (one hash), but jumps their queue, and its release is published
// on the RLock's channel only, never on a fair waiter's own. Client.GetFairLock
// is the Go side of an RFairLock (the Fair* cases of TestDeployments).
func TestRLockIsNoFairLock(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	ctx := bounded(t, 20*time.Second)
	const name = "fair"
	fairTry := func(thread int64) (bool, error) {
		keys := []string{name, "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}"}
		_, err := jFairLock.Run(ctx, c, keys, j.ttl.Milliseconds(), j.field(thread), 300000, time.Now().UnixMilli()).Int64()
		if errors.Is(err, redis.Nil) {
			return true, nil
		}
		return false, err
	}
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fairTry(1); ok || err != nil {
		t.Fatalf("a Java fair waiter took a lock Go holds: %v %v", ok, err)
	}
	if q := c.LRange(ctx, "redisson_lock_queue:{fair}", 0, -1).Val(); len(q) != 1 || q[0] != j.field(1) {
		t.Fatalf("queue %v", q)
	}
	mon := srv.Monitor(t)
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, cmd := range mon.Stop(t) {
		if len(cmd.Args) > 1 && strings.Contains(strings.ToUpper(cmd.Args[0]), "PUBLISH") {
			published = append(published, cmd.Args[1])
		}
	}
	if len(published) != 1 || published[0] != "redisson_lock__channel:{fair}" {
		t.Fatalf("published on %v; a fair waiter listens on redisson_lock__channel:{fair}:%s", published, j.field(1))
	}
	// The lock is free and a Java fair waiter is first in the queue: a Go
	// RLock takes it all the same.
	h, err = cl.GetLock(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("Go did not jump the fair queue: %v", err)
	}
	_ = h.Unlock(ctx)
}

// queueOf is the fair queue of name, first first.
func queueOf(ctx context.Context, t *testing.T, c redis.UniversalClient, name string) []string {
	t.Helper()
	q, err := c.LRange(ctx, jPrefix("redisson_lock_queue", name), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitQueued waits until field is queued for name.
func waitQueued(ctx context.Context, t *testing.T, c redis.UniversalClient, name, field string) {
	t.Helper()
	for ctx.Err() == nil {
		if slices.Contains(queueOf(ctx, t, c, name), field) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never queued for %s: queue %v", field, name, queueOf(context.Background(), t, c, name))
}

// turns records who entered a critical section, in order, and fails the
// test on overlap.
type turns struct {
	o   *overlap
	mu  sync.Mutex
	log []string
}

func (tr *turns) enter(who string) {
	tr.o.enter(who)
	tr.mu.Lock()
	tr.log = append(tr.log, who)
	tr.mu.Unlock()
}

// testFairOrder: Go and Java fair waiters queued alternately get the lock
// in queue order, one at a time, each woken by the release before it
// (Go's waiters wait an hour but for a message, the holders' TTL is 30s,
// and the test's bound 25s).
func testFairOrder(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 25*time.Second)
	name := "fairorder-" + uuid()
	cl := newClient(t, c, redisson.WithBackOff(patient))
	first, err := cl.GetFairLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := &turns{o: &overlap{t: t}}
	var want []string
	var wg sync.WaitGroup
	for i := range 3 {
		gowho, gofield := fmt.Sprintf("go %d", i), fmt.Sprintf("%s:%d", cl.ID(), 100+i)
		want = append(want, gowho)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := cl.GetFairLock(name).Lock(redisson.WithOwner(ctx, redisson.Owner{ThreadID: int64(100 + i)}))
			if err != nil {
				t.Errorf("%s: %v", gowho, err)
				return
			}
			tr.enter(gowho)
			if err := h.Unlock(ctx); err != nil {
				t.Errorf("%s unlock: %v", gowho, err)
			}
		}()
		waitQueued(ctx, t, c, name, gofield)
		j := newJava(c, 30*time.Second)
		jwho := fmt.Sprintf("java %d", i)
		want = append(want, jwho)
		if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); ok || err != nil { // queues it
			t.Fatalf("%s: %v %v", jwho, ok, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := j.fairLock(ctx, t, name, 1, 5*time.Minute); err != nil {
				t.Errorf("%s: %v", jwho, err)
				return
			}
			tr.enter(jwho)
			if r, err := j.fairUnlock(ctx, name, 1); r != 1 || err != nil {
				t.Errorf("%s unlock: %d %v", jwho, r, err)
			}
		}()
		waitSubscribers(t, c, j.fairChannel(name, 1))
	}
	if q := queueOf(ctx, t, c, name); len(q) != 6 {
		t.Fatalf("queue %v, want 6 waiters", q)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(tr.log, want) {
		t.Fatalf("turns %v, want the queue's order %v", tr.log, want)
	}
	noFairKeys(ctx, t, c, name)
}

// noFairKeys fails the test if name's hash, queue or timeouts exist.
func noFairKeys(ctx context.Context, t *testing.T, c redis.UniversalClient, name string) {
	t.Helper()
	for _, k := range fairKeys(name) {
		if n := c.Exists(ctx, k).Val(); n != 0 {
			t.Errorf("%s outlived the last waiter", k)
		}
	}
}

// heard waits for a message on w: Redisson's UNLOCK_MESSAGE.
func heard(ctx context.Context, t *testing.T, w *jWaiter, what string) {
	t.Helper()
	select {
	case m := <-w.msgs:
		if m.Payload != "0" {
			t.Fatalf("%s: message %q, want 0", what, m.Payload)
		}
	case <-ctx.Done():
		t.Fatalf("%s: no message on the waiter's channel", what)
	}
}

// testFairGoWakesJava: a Go fair release publishes to the first Java
// waiter's own channel.
func testFairGoWakesJava(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second) // the holder's TTL is 30s: only a message gets Java in sooner
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "fairgowakes-" + uuid()
	h, err := cl.GetFairLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); ok || err != nil {
		t.Fatalf("Java entered a lock Go holds: %v %v", ok, err)
	}
	w := j.subscribe(ctx, t, j.fairChannel(name, 1))
	defer w.close()
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	heard(ctx, t, w, "the Java waiter after a Go release")
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); !ok || err != nil {
		t.Fatalf("Java after the message: %v %v", ok, err)
	}
	if q := queueOf(ctx, t, c, name); len(q) != 0 {
		t.Fatalf("queue %v after the first waiter got in", q)
	}
	if r, err := j.fairUnlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatal(r, err)
	}
}

// testFairJavaWakesGo: a Java fair release wakes the first Go waiter,
// whose backoff is an hour and whose holder's TTL is 30s.
func testFairJavaWakesGo(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	j := newJava(c, 30*time.Second)
	name := "fairjavawakes-" + uuid()
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	owner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 9})
	got := make(chan error, 1)
	go func() {
		h, err := cl.GetFairLock(name).Lock(owner)
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	waitQueued(ctx, t, c, name, cl.ID()+":9")
	waitSubscribers(t, c, cl.GetFairLock(name).Channel()+":"+cl.ID()+":9")
	if r, err := j.fairUnlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatal(r, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Go waiter: %v (only the message could wake it in time)", err)
	}
}

// testFairGiveUp: a Go waiter that gives up leaves the queue, so that the
// Java waiter behind it is the one a release wakes (its wait being 5
// minutes, only the message gets it in).
func testFairGiveUp(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	j := newJava(c, 30*time.Second)
	name := "fairgiveup-" + uuid()
	goField := cl.ID() + ":5"
	giveUp := func() (context.CancelFunc, chan error) {
		wctx, cancel := context.WithCancel(redisson.WithOwner(ctx, redisson.Owner{ThreadID: 5}))
		done := make(chan error, 1)
		go func() {
			_, err := cl.GetFairLock(name).Lock(wctx)
			done <- err
		}()
		waitQueued(ctx, t, c, name, goField)
		return cancel, done
	}
	gaveUp := func(cancel context.CancelFunc, done chan error) {
		cancel()
		if err := <-done; !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a Go waiter that gave up: %v", err)
		}
		if q := queueOf(ctx, t, c, name); len(q) != 1 || q[0] != j.field(1) {
			t.Fatalf("queue %v after the Go waiter gave up, want only Java's", q)
		}
	}
	if ok, _, err := j.fairTry(ctx, name, 2, 5*time.Minute); !ok || err != nil { // the holder
		t.Fatal(ok, err)
	}
	cancel, done := giveUp()
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); ok || err != nil { // behind Go
		t.Fatal(ok, err)
	}
	w := j.subscribe(ctx, t, j.fairChannel(name, 1))
	defer w.close()
	gaveUp(cancel, done)
	if r, err := j.fairUnlock(ctx, name, 2); r != 1 || err != nil {
		t.Fatal(r, err)
	}
	heard(ctx, t, w, "the Java waiter behind one that gave up")
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	_, _ = j.fairUnlock(ctx, name, 1)
}

// testFairDeadJavaWaiter: a Java waiter that died queued is told of the
// release and never comes; once its timeout (its threadWaitTime, 300ms,
// past the holder's TTL, both in its clock) has passed, the Go waiter
// behind it drops it and gets in. The Go waiter's backoff is an hour: it
// looks again when the holder's TTL or the dead waiter's time runs out.
func testFairDeadJavaWaiter(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	holder := newJava(c, time.Second)
	dead := newJava(c, 30*time.Second)
	name := "fairdead-" + uuid()
	if ok, _, err := holder.fairTry(ctx, name, 1, 5*time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _, err := dead.fairTry(ctx, name, 1, 300*time.Millisecond); ok || err != nil {
		t.Fatal(ok, err)
	}
	owner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 4})
	got := make(chan error, 1)
	go func() {
		h, err := cl.GetFairLock(name).Lock(owner)
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	waitQueued(ctx, t, c, name, cl.ID()+":4")
	if q := queueOf(ctx, t, c, name); len(q) != 2 || q[0] != dead.field(1) {
		t.Fatalf("queue %v, want the dead waiter first", q)
	}
	if r, err := holder.fairUnlock(ctx, name, 1); r != 1 || err != nil { // tells the dead waiter only
		t.Fatal(r, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Go waiter behind a dead one: %v", err)
	}
	if s := c.ZScore(ctx, jPrefix("redisson_lock_timeout", name), dead.field(1)); s.Err() == nil {
		t.Fatalf("the dead waiter kept its timeout %v", s.Val())
	}
}

// testFairReentryAndForce: a Go fair holder's entries count; a Go owner
// does not jump a Java waiter queued first, even with the lock free; a
// ForceUnlock tells the first waiter.
func testFairReentryAndForce(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "fairreentry-" + uuid()
	lk := cl.GetFairLock(name)
	h, err := lk.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holds := []*redisson.Hold{h}
	for range 2 {
		inner, err := lk.Lock(h.Context())
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, inner)
	}
	if n, _ := lk.HoldCount(h.Context()); n != 3 || c.HGet(ctx, name, h.Field()).Val() != "3" {
		t.Fatalf("count %d after three entries", n)
	}
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); ok || err != nil {
		t.Fatalf("Java entered a lock Go holds: %v %v", ok, err)
	}
	if q := queueOf(ctx, t, c, name); len(q) != 1 {
		t.Fatalf("queue %v: Go's re-entries must not queue", q)
	}
	for i := 2; i > 0; i-- {
		if err := holds[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if v := c.HGet(ctx, name, h.Field()).Val(); v != fmt.Sprint(i) {
			t.Fatalf("count %s after an unlock, want %d", v, i)
		}
	}
	w := j.subscribe(ctx, t, j.fairChannel(name, 1))
	defer w.close()
	if ok, err := newClient(t, c).GetFairLock(name).ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	heard(ctx, t, w, "the first waiter after a ForceUnlock")
	// Free, with Java first: another Go owner neither takes it nor queues.
	if _, err := lk.TryLock(ctx); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("Go TryLock jumped the Java waiter: %v", err)
	}
	if q := queueOf(ctx, t, c, name); len(q) != 1 || q[0] != j.field(1) {
		t.Fatalf("queue %v after a TryLock, which never queues", q)
	}
	if ok, _, err := j.fairTry(ctx, name, 1, 5*time.Minute); !ok || err != nil {
		t.Fatalf("the Java waiter after the ForceUnlock: %v %v", ok, err)
	}
	if err := h.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("unlock after a ForceUnlock: %v", err)
	}
	_, _ = j.fairUnlock(ctx, name, 1)
}
