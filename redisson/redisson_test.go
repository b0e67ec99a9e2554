package redisson_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

var redisAddr string

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// patient waits only for messages and TTLs: a Go waiter with it that gets
// the lock before the holder's TTL ran out was woken by a release message.
func patient() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }

func newClient(t testing.TB, c redis.UniversalClient, opts ...redisson.Option) *redisson.Client {
	t.Helper()
	cl, err := redisson.New(noResend(t, c), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// noResend returns c, or a client of the same servers that does not
// resend commands (MaxRetries -1), which New requires: the test servers'
// clients (redistest) keep go-redis's default. Hooks added to c are not
// carried over: a test that adds one builds its client with MaxRetries -1.
func noResend(t testing.TB, c redis.UniversalClient) redis.UniversalClient {
	switch rc := c.(type) {
	case *redis.Client:
		if o := *rc.Options(); o.MaxRetries > 0 {
			o.MaxRetries = -1
			nc := redis.NewClient(&o)
			t.Cleanup(func() { _ = nc.Close() })
			return nc
		}
	case *redis.ClusterClient:
		if o := *rc.Options(); o.MaxRetries > 0 {
			o.MaxRetries = -1
			nc := redis.NewClusterClient(&o)
			t.Cleanup(func() { _ = nc.Close() })
			return nc
		}
	}
	return c
}

// bounded is a generous bound on a wait that should end far sooner: a
// failure means it did not end, not that it was slow.
func bounded(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestDeployments runs every scenario where Go and Java share names on
// one server and on a three-primary Cluster (sharded pub/sub, Redis 7).
func TestDeployments(t *testing.T) {
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
				{"Layout", testLayout},
				{"FencedTokens", testFencedTokens},
				{"ReentryCounts", testReentryCounts},
				{"GoReleaseWakesJava", testGoWakesJava},
				{"JavaReleaseWakesGo", testJavaWakesGo},
				{"NoOverlap", testNoOverlap},
				{"DeadJavaHolderExpires", testDeadJava},
				{"JavaRenewalKeepsGoOut", testJavaRenewal},
				{"SharedOwnerAgainstJava", testSharedOwner},
				{"WaitersOfOneClient", testWaitersOfOneClient},
				{"Downgrade", testDowngrade},
				{"ForceUnlockIsLoss", testForceUnlockIsLoss},
				{"ReadWriteModes", testRWModes},
				{"JavaReadUnlockSeesGoReaders", testRWTimeoutKeys},
				{"ReadWriteNoOverlap", testRWNoOverlap},
				{"FairOrder", testFairOrder},
				{"FairGoReleaseWakesJava", testFairGoWakesJava},
				{"FairJavaReleaseWakesGo", testFairJavaWakesGo},
				{"FairGiveUpLeavesQueue", testFairGiveUp},
				{"FairJavaGivesUp", testFairJavaGivesUp},
				{"SemNoOverlap", testSemNoOverlap},
				{"SemReleaseWakes", testSemWakes},
				{"SemDeadJavaPermitReclaimed", testSemDeadJavaPermit},
				{"SemGoPermitEndsFirst", testSemGoPermitEndsFirst},
				{"SemReleaseErrors", testSemReleaseErrors},
				{"SemAgreesWithJava", testSemAgrees},
				{"FairDeadJavaWaiterSkipped", testFairDeadJavaWaiter},
				{"FairReentryAndForceUnlock", testFairReentryAndForce},
			} {
				t.Run(s.name, func(t *testing.T) { s.run(t, d.c) })
			}
		})
	}
}

func testLayout(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithNamePrefix("app1:"))
	h, err := cl.GetLock("orders").Lock(redisson.WithOwner(ctx, redisson.Owner{ThreadID: 7}))
	if err != nil {
		t.Fatal(err)
	}
	want := cl.ID() + ":7"
	if h.Field() != want {
		t.Fatalf("field %q, want %q", h.Field(), want)
	}
	got, err := c.HGetAll(ctx, "app1:orders").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[want] != "1" {
		t.Fatalf("hash app1:orders = %v, want {%s: 1}", got, want)
	}
	pttl, err := c.PTTL(ctx, "app1:orders").Result()
	if err != nil || pttl <= 0 || pttl > redisson.DefaultWatchdogTimeout {
		t.Fatalf("PTTL %v (%v), want within the 30s watchdog timeout", pttl, err)
	}
	// A Java client sees it held, and is told the holder's TTL.
	j := newJava(c, 30*time.Second)
	ok, left, err := j.tryLock(ctx, "app1:orders", 1)
	if err != nil || ok || left <= 0 {
		t.Fatalf("Java tryLock = %v, %d, %v: want held with a TTL", ok, left, err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, "app1:orders").Result(); n != 0 {
		t.Fatal("the hash outlived its last unlock")
	}
	if ch := cl.GetLock("orders").Channel(); ch != "redisson_lock__channel:{app1:orders}" {
		t.Fatalf("channel %q", ch)
	}
	if ch := cl.GetReadWriteLock("a{b}").ReadLock().Channel(); ch != "redisson_rwlock:app1:a{b}" {
		t.Fatalf("channel %q", ch)
	}
}

func testFencedTokens(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "fenced-" + uuid()
	jt, err := j.tryFenced(ctx, name, 1)
	if err != nil || jt != 1 {
		t.Fatalf("Java's first token %d (%v), want 1", jt, err)
	}
	if _, err := j.unlock(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	h, err := cl.GetFencedLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := cl.GetFencedLock(name).Lock(h.Context()) // re-entry draws one too
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() != 2 || inner.Token() != 3 {
		t.Fatalf("Go tokens %d, %d; want 2, 3 after Java's 1", h.Token(), inner.Token())
	}
	// RFencedLock.getToken() reads the counter: Java sees the same token.
	if v, _ := c.Get(ctx, "redisson_lock_token:{"+name+"}").Int64(); v != inner.Token() {
		t.Fatalf("token counter %d, want %d", v, inner.Token())
	}
	if ttl := c.PTTL(ctx, "redisson_lock_token:{"+name+"}").Val(); ttl != -1 {
		t.Fatalf("token counter PTTL %v: Redisson's never expires", ttl)
	}
	_ = inner.Unlock(ctx)
	_ = h.Unlock(ctx)
	jt, err = j.tryFenced(ctx, name, 1)
	if err != nil || jt != 4 {
		t.Fatalf("Java's token after Go's %d (%v), want 4", jt, err)
	}
	_, _ = j.unlock(ctx, name, 1)
	// A plain RLock draws none: fencing cannot order its holders.
	p, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Token() != 0 {
		t.Fatalf("plain RLock token %d", p.Token())
	}
	_ = p.Unlock(ctx)
}

func testReentryCounts(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "reentry-" + uuid()
	count := func(field string) int64 {
		v, err := c.HGet(ctx, name, field).Int64()
		if errors.Is(err, redis.Nil) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	lk := cl.GetLock(name)
	outer, err := lk.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holds := []*redisson.Hold{outer}
	for range 2 {
		h, err := lk.Lock(holds[len(holds)-1].Context()) // the context carries the owner
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	if n := count(outer.Field()); n != 3 {
		t.Fatalf("Go count %d after three entries", n)
	}
	if ok, _, _ := j.tryLock(ctx, name, 5); ok {
		t.Fatal("Java entered a lock Go holds")
	}
	for i := len(holds) - 1; i >= 0; i-- {
		if err := holds[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(outer.Field()); n != int64(i) {
			t.Fatalf("Go count %d after an unlock, want %d", n, i)
		}
		if i > 0 && holds[0].Err() != nil {
			t.Fatalf("outer hold ended by an inner unlock: %v", holds[0].Err())
		}
	}
	if err := outer.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second unlock: %v, want ErrNotHeld", err)
	}
	// Java's turn: Go's lock of another owner waits on it.
	for range 2 {
		if ok, _, err := j.tryLock(ctx, name, 5); !ok || err != nil {
			t.Fatalf("Java entry: %v %v", ok, err)
		}
	}
	if n := count(j.field(5)); n != 2 {
		t.Fatalf("Java count %d after two entries", n)
	}
	if _, err := lk.TryLock(ctx); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("Go TryLock on a Java-held lock: %v", err)
	}
	if r, _ := j.unlock(ctx, name, 5); r != 0 {
		t.Fatalf("Java inner unlock answered %d", r)
	}
	if _, err := lk.TryLock(ctx); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatal("Go took the lock after Java's inner unlock")
	}
	if r, _ := j.unlock(ctx, name, 5); r != 1 {
		t.Fatalf("Java last unlock answered %d", r)
	}
	h, err := lk.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Unlock(ctx)
}

func testGoWakesJava(t *testing.T, c redis.UniversalClient) {
	_, cluster := c.(*redis.ClusterClient)
	for _, sharding := range []redisson.Sharding{redisson.ShardedAuto, redisson.ShardedOff} {
		t.Run(fmt.Sprint(sharding), func(t *testing.T) {
			if !cluster && sharding == redisson.ShardedOff {
				t.Skip("one server publishes classic messages either way")
			}
			j := newJava(c, 30*time.Second)
			if sharding == redisson.ShardedOff {
				// A Java client with shardedSubscriptionMode OFF.
				j.publish, j.sharded = "PUBLISH", false
			}
			goWakesJava(t, c, j, sharding)
		})
	}
}

func goWakesJava(t *testing.T, c redis.UniversalClient, j *javaClient, sharding redisson.Sharding) {
	ctx := bounded(t, 20*time.Second) // the holder's TTL is 30s: only a message gets Java in sooner
	cl := newClient(t, c, redisson.WithSharding(sharding))
	name := "gowakes-" + uuid()
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := j.subscribe(ctx, t, "redisson_lock__channel:{"+name+"}")
	defer w.close()
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-w.msgs:
		if m.Payload != "0" {
			t.Fatalf("message %q, want Redisson's UNLOCK_MESSAGE 0", m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("a Java waiter heard nothing of a Go release")
	}
	if ok, _, err := j.tryLock(ctx, name, 1); !ok || err != nil {
		t.Fatalf("Java after the message: %v %v", ok, err)
	}
	_, _ = j.unlock(ctx, name, 1)
}

func testJavaWakesGo(t *testing.T, c redis.UniversalClient) {
	// Java on one server publishes classic messages only; on a Cluster
	// sharded ones, or classic ones with sharding OFF.
	kinds := []string{"PUBLISH"}
	if _, cluster := c.(*redis.ClusterClient); cluster {
		kinds = append(kinds, "SPUBLISH")
	}
	for _, publish := range kinds {
		t.Run(publish, func(t *testing.T) {
			ctx := bounded(t, 20*time.Second)
			cl := newClient(t, c, redisson.WithBackOff(patient))
			j := newJava(c, 30*time.Second)
			j.publish = publish // a Java client with sharding OFF publishes classic ones on a Cluster
			name := "javawakes-" + uuid()
			if ok, _, err := j.tryLock(ctx, name, 1); !ok || err != nil {
				t.Fatal(ok, err)
			}
			got := make(chan error, 1)
			go func() {
				h, err := cl.GetLock(name).Lock(ctx)
				if err == nil {
					err = h.Unlock(ctx)
				}
				got <- err
			}()
			// The waiter subscribes before it looks again (Lock), so
			// whenever Java unlocks, the waiter hears it or sees it free.
			waitSubscribers(t, c, "redisson_lock__channel:{"+name+"}")
			if r, err := j.unlock(ctx, name, 1); r != 1 || err != nil {
				t.Fatal(r, err)
			}
			if err := <-got; err != nil {
				t.Fatalf("Go waiter: %v (its backoff is an hour and the TTL 30s: only the message wakes it)", err)
			}
		})
	}
}

// waitSubscribers waits until someone listens on channel, in either kind.
func waitSubscribers(t *testing.T, c redis.UniversalClient, channel string) {
	t.Helper()
	ctx := bounded(t, 10*time.Second)
	for ctx.Err() == nil {
		n, _ := c.PubSubNumSub(ctx, channel).Result()
		s, _ := c.PubSubShardNumSub(ctx, channel).Result()
		if n[channel] > 0 || s[channel] > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("nobody subscribed to %s", channel)
}

// overlap is a shared critical section that fails the test on overlap.
type overlap struct {
	t      testing.TB
	inside atomic.Int32
	turns  atomic.Int32
}

func (o *overlap) enter(who string) {
	if n := o.inside.Add(1); n != 1 {
		o.t.Errorf("%s entered with %d holders inside", who, n)
	}
	o.turns.Add(1)
	time.Sleep(time.Millisecond)
	o.inside.Add(-1)
}

func testNoOverlap(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 60*time.Second)
	name := "overlap-" + uuid()
	const goHolders, javaHolders, rounds = 3, 3, 8
	o := &overlap{t: t}
	var wg sync.WaitGroup
	var javaByMessage atomic.Int32
	for i := range goHolders {
		cl := newClient(t, c, redisson.WithBackOff(patient))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				h, err := cl.GetLock(name).Lock(ctx)
				if err != nil {
					t.Errorf("go %d: %v", i, err)
					return
				}
				o.enter(fmt.Sprintf("go %d", i))
				if err := h.Unlock(ctx); err != nil {
					t.Errorf("go %d unlock: %v", i, err)
				}
			}
		}()
	}
	for i := range javaHolders {
		j := newJava(c, 30*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				n, err := j.lock(ctx, t, name, 1, func() (bool, int64, error) { return j.tryLock(ctx, name, 1) },
					"redisson_lock__channel:{"+name+"}")
				if err != nil {
					t.Errorf("java %d: %v", i, err)
					return
				}
				javaByMessage.Add(int32(n))
				o.enter(fmt.Sprintf("java %d", i))
				if r, err := j.unlock(ctx, name, 1); r != 1 || err != nil {
					t.Errorf("java %d unlock: %d %v", i, r, err)
				}
			}
		}()
	}
	wg.Wait()
	if got := o.turns.Load(); got != (goHolders+javaHolders)*rounds {
		t.Fatalf("%d turns, want %d", got, (goHolders+javaHolders)*rounds)
	}
	// Every waiter waits an hour or the 30s TTL unless a message wakes
	// it: finishing at all shows each side's releases woke the other.
	if javaByMessage.Load() == 0 {
		t.Error("no Java waiter was woken by a message")
	}
}

func testDeadJava(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	j := newJava(c, 500*time.Millisecond) // its process dies: no renewal, no unlock
	name := "dead-" + uuid()
	if ok, _, err := j.tryLock(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	h, err := cl.GetLock(name).Lock(ctx) // woken by the holder's TTL, not by a message
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c.HGet(ctx, name, j.field(1)).Result(); n != "" {
		t.Fatal("the dead holder's field is still there")
	}
	_ = h.Unlock(ctx)
}

func testForceUnlockIsLoss(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithWatchdogTimeout(900*time.Millisecond))
	name := "force-" + uuid()
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A Java admin's forceUnlock: the same script effects.
	other := newClient(t, c)
	if ok, err := other.GetLock(name).ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the holder never noticed the force unlock")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	if _, err := h.Exec(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "{"+name+"}x", 1, 0); return nil }); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Exec after loss: %v", err)
	}
	if err := h.Unlock(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Unlock after loss: %v", err)
	}
}

func testRWModes(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	j := newJava(c, 30*time.Second)
	name := "rw-" + uuid()
	mode := func() string { return c.HGet(ctx, name, "mode").Val() }
	rw := cl.GetReadWriteLock(name)
	gr, err := rw.ReadLock().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := j.tryRead(ctx, name, 1); !ok || err != nil {
		t.Fatalf("a Java reader beside a Go reader: %v %v", ok, err)
	}
	if mode() != "read" {
		t.Fatalf("mode %q with two readers", mode())
	}
	if ok, _, _ := j.tryWrite(ctx, name, 2); ok {
		t.Fatal("a Java writer entered beside readers")
	}
	// A Go writer waits for both readers.
	wrote := make(chan *redisson.Hold, 1)
	go func() {
		h, err := rw.WriteLock().Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		wrote <- h
	}()
	waitSubscribers(t, c, "redisson_rwlock:{"+name+"}")
	if err := gr.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := j.readUnlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatalf("the last reader's unlock: %d %v", r, err)
	}
	gw := <-wrote
	if gw == nil {
		t.FailNow()
	}
	if mode() != "write" || c.HGet(ctx, name, gw.Field()).Val() != "1" || !strings.HasSuffix(gw.Field(), ":write") {
		t.Fatalf("after the Go writer got in: %v", c.HGetAll(ctx, name).Val())
	}
	if ok, _, _ := j.tryRead(ctx, name, 1); ok {
		t.Fatal("a Java reader entered beside a Go writer")
	}
	// A Java writer waits; the Go writer's release ('1') wakes it.
	w := j.subscribe(ctx, t, "redisson_rwlock:{"+name+"}")
	defer w.close()
	if err := gw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-w.msgs:
		if m.Payload != "1" {
			t.Fatalf("write unlock message %q, want READ_UNLOCK_MESSAGE 1", m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("the Java writer heard nothing")
	}
	if ok, _, err := j.tryWrite(ctx, name, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// A Go reader waits for the Java writer.
	read := make(chan *redisson.Hold, 1)
	go func() {
		h, err := rw.ReadLock().Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		read <- h
	}()
	waitSubscribers(t, c, "redisson_rwlock:{"+name+"}")
	if r, err := j.writeUnlock(ctx, name, 2); r != 1 || err != nil {
		t.Fatal(r, err)
	}
	gr = <-read
	if gr == nil {
		t.FailNow()
	}
	if mode() != "read" {
		t.Fatalf("mode %q after the Go reader got in", mode())
	}
	if err := gr.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, name).Result(); n != 0 {
		t.Fatal("the hash outlived its last reader")
	}
}

// testRWTimeoutKeys: a Java reader's unlock gives the hash the longest life
// among the read entries' timeout keys; a Go reader's keys must be named as
// Java's, or the hash would expire under the Go reader.
func testRWTimeoutKeys(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c, redisson.WithWatchdogTimeout(20*time.Second))
	j := newJava(c, 800*time.Millisecond) // a short-lived Java reader
	name := "rwkeys-" + uuid()
	gr, err := cl.GetReadWriteLock(name).ReadLock().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := j.tryRead(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if r, err := j.readUnlock(ctx, name, 1); r != 0 || err != nil {
		t.Fatalf("Java reader's unlock beside a Go reader answered %d (%v): 1 means it deleted the lock under the Go reader", r, err)
	}
	key := "{" + name + "}:" + gr.Field() + ":rwlock_timeout:1"
	if pttl := c.PTTL(ctx, key).Val(); pttl <= 0 {
		t.Fatalf("the Go reader's timeout key %s: PTTL %v", key, pttl)
	}
	if pttl := c.PTTL(ctx, name).Val(); pttl < 10*time.Second {
		t.Fatalf("after the Java reader left, the hash lives %v: less than the Go reader's entry", pttl)
	}
	// A Java reader's renewal sets the hash to its own watchdog time and
	// renews every reader's timeout key with it: what a Go TTL above a
	// Java one would lose (WithJavaWatchdogTimeout).
	if ok, _, _ := j.tryRead(ctx, name, 1); !ok {
		t.Fatal("Java reader")
	}
	if ok, err := j.readRenew(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if pttl := c.PTTL(ctx, name).Val(); pttl > 800*time.Millisecond {
		t.Fatalf("Java's renewal left the hash %v, not its own 800ms", pttl)
	}
	_, _ = j.readUnlock(ctx, name, 1)
	if err := gr.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, name, key).Result(); n != 0 {
		t.Fatal("keys outlived the last reader")
	}
}

func testRWNoOverlap(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 60*time.Second)
	name := "rwoverlap-" + uuid()
	var readers, writers atomic.Int32
	check := func(who string, write bool) {
		if write {
			if w := writers.Add(1); w != 1 || readers.Load() != 0 {
				t.Errorf("%s wrote beside %d writers and %d readers", who, w-1, readers.Load())
			}
			time.Sleep(time.Millisecond)
			writers.Add(-1)
			return
		}
		readers.Add(1)
		if w := writers.Load(); w != 0 {
			t.Errorf("%s read beside a writer", who)
		}
		time.Sleep(time.Millisecond)
		readers.Add(-1)
	}
	var wg sync.WaitGroup
	const rounds = 6
	for i := range 2 {
		cl := newClient(t, c, redisson.WithBackOff(patient))
		rw := cl.GetReadWriteLock(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				write := (r+i)%2 == 0
				lk := rw.ReadLock()
				if write {
					lk = rw.WriteLock()
				}
				h, err := lk.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				check(fmt.Sprintf("go %d", i), write)
				if err := h.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
		j := newJava(c, 30*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				write := (r+i)%2 == 1
				try := func() (bool, int64, error) { return j.tryRead(ctx, name, 1) }
				if write {
					try = func() (bool, int64, error) { return j.tryWrite(ctx, name, 1) }
				}
				if _, err := j.lock(ctx, t, name, 1, try, "redisson_rwlock:{"+name+"}"); err != nil {
					t.Error(err)
					return
				}
				check(fmt.Sprintf("java %d", i), write)
				var err error
				if write {
					_, err = j.writeUnlock(ctx, name, 1)
				} else {
					_, err = j.readUnlock(ctx, name, 1)
				}
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// testJavaRenewal: a Java holder whose watchdog renews keeps a Go waiter
// out past its TTL; Java's renewal checks the field as Go's does.
func testJavaRenewal(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 30*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 2*time.Second)
	name := "renewed-" + uuid()
	if ok, _, err := j.tryLock(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for i := range 6 { // 6 x 500ms: longer than the TTL, with 1.5s to spare each time
		if ok, err := j.renew(ctx, name, 1); !ok || err != nil {
			t.Fatalf("renewal %d: %v %v", i, ok, err)
		}
		if _, err := cl.GetLock(name).TryLock(ctx); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("Go got a renewed Java lock: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ok, _ := j.renew(ctx, name, 2); ok {
		t.Fatal("a Java renewal by a thread that does not hold succeeded")
	}
	if r, err := j.unlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatal(r, err)
	}
}

// testSharedOwner: goroutines sharing one owner (a job id) enter the lock
// together, each entry counted; a Java holder gets in only when every one
// of them has left, and the count never goes wrong under the contention.
func testSharedOwner(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 60*time.Second)
	name := "shared-" + uuid()
	cl := newClient(t, c, redisson.WithBackOff(patient))
	owner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 99})
	var goInside, javaInside atomic.Int32
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				h, err := cl.GetLock(name).Lock(owner)
				if err != nil {
					t.Errorf("go %d: %v", i, err)
					return
				}
				goInside.Add(1)
				if javaInside.Load() != 0 {
					t.Errorf("go %d entered while Java held", i)
				}
				time.Sleep(time.Millisecond)
				goInside.Add(-1)
				if err := h.Unlock(ctx); err != nil {
					t.Errorf("go %d unlock: %v", i, err)
				}
			}
		}()
	}
	j := newJava(c, 30*time.Second)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			if _, err := j.lock(ctx, t, name, 1, func() (bool, int64, error) { return j.tryLock(ctx, name, 1) },
				"redisson_lock__channel:{"+name+"}"); err != nil {
				t.Error(err)
				return
			}
			javaInside.Add(1)
			if goInside.Load() != 0 {
				t.Error("Java entered while Go held")
			}
			time.Sleep(time.Millisecond)
			javaInside.Add(-1)
			if r, err := j.unlock(ctx, name, 1); r != 1 || err != nil {
				t.Errorf("java unlock: %d %v", r, err)
			}
		}
	}()
	wg.Wait()
	if n := c.Exists(ctx, name).Val(); n != 0 {
		t.Fatalf("the hash outlived every entry: %v", c.HGetAll(ctx, name).Val())
	}
}

// testWaitersOfOneClient: several waiters of one Client behind a Java
// holder: a "0" wakes one of them (as Redisson's LockPubSub lets one
// thread of a process look), and each release wakes the next, so every
// one gets the lock without a poll (their backoff is an hour, the TTL 30s).
func testWaitersOfOneClient(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c, redisson.WithBackOff(patient))
	j := newJava(c, 30*time.Second)
	name := "onewaker-" + uuid()
	if ok, _, err := j.tryLock(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	const waiters = 5
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			h, err := cl.GetLock(name).Lock(ctx)
			if err == nil {
				time.Sleep(time.Millisecond)
				err = h.Unlock(ctx)
			}
			done <- err
		}()
	}
	waitSubscribers(t, c, "redisson_lock__channel:{"+name+"}")
	if r, err := j.unlock(ctx, name, 1); r != 1 || err != nil {
		t.Fatal(r, err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// testDowngrade: a Go writer reads under its write hold (Redisson lets the
// writer's thread read), then leaves the write lock: the hash turns to mode
// read, so a Java reader gets in and a Java writer does not, until the Go
// read entry leaves too.
func testDowngrade(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	name := "downgrade-" + uuid()
	rw := cl.GetReadWriteLock(name)
	w, err := rw.WriteLock().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.ReadLock().Lock(w.Context()) // the same owner
	if err != nil {
		t.Fatalf("the writer's read: %v", err)
	}
	if r.Field()+":write" != w.Field() {
		t.Fatalf("fields %q and %q are not one owner's", r.Field(), w.Field())
	}
	if ok, _, _ := j.tryRead(ctx, name, 1); ok {
		t.Fatal("a Java reader entered beside a Go writer")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if m := c.HGet(ctx, name, "mode").Val(); m != "read" {
		t.Fatalf("mode %q after the writer left its read entry behind", m)
	}
	if ok, _, _ := j.tryWrite(ctx, name, 2); ok {
		t.Fatal("a Java writer entered beside a Go reader")
	}
	if ok, _, err := j.tryRead(ctx, name, 1); !ok || err != nil {
		t.Fatalf("a Java reader after the downgrade: %v %v", ok, err)
	}
	if r.Err() != nil {
		t.Fatalf("the Go read entry ended: %v", r.Err())
	}
	_, _ = j.readUnlock(ctx, name, 1)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the hash outlived its last reader")
	}
}
