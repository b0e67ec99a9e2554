package redisson_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
)

// counted is a section that k holders may share: it fails the test when
// more than k are inside.
type counted struct {
	t      testing.TB
	k      int
	mu     sync.Mutex
	inside int
	turns  int
}

func (c *counted) enter(who string) {
	c.mu.Lock()
	c.inside++
	c.turns++
	if c.inside > c.k {
		c.t.Errorf("%s entered with %d holders inside, over %d permits", who, c.inside, c.k)
	}
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
	c.mu.Lock()
	c.inside--
	c.mu.Unlock()
}

// testSemNoOverlap: Go and Java holders share a semaphore of two permits,
// leased for 30s (longer than the test's bound): never more than two are
// inside, and every waiter, Go (an hour's backoff) or Java, gets in only
// because the other side's releases woke it.
func testSemNoOverlap(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 25*time.Second)
	name := "semoverlap-" + uuid()
	const k, goHolders, javaHolders, rounds = 2, 3, 3, 6
	sec := &counted{t: t, k: k}
	cl := newClient(t, c, redisson.WithBackOff(patient))
	if ok, err := cl.GetPermitExpirableSemaphore(name).TrySetPermits(ctx, k); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var wg sync.WaitGroup
	for i := range goHolders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := cl.GetPermitExpirableSemaphore(name)
			for range rounds {
				p, err := sem.Acquire(ctx, 30*time.Second)
				if err != nil {
					t.Errorf("go %d: %v", i, err)
					return
				}
				sec.enter(fmt.Sprintf("go %d", i))
				if err := p.Release(ctx); err != nil {
					t.Errorf("go %d release: %v", i, err)
				}
			}
		}()
	}
	var byMessage atomic.Int32
	for i := range javaHolders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			byMessage.Add(int32(javaRounds(ctx, t, newJava(c, 30*time.Second), name, fmt.Sprintf("java %d", i), rounds, sec)))
		}()
	}
	wg.Wait()
	if sec.turns != (goHolders+javaHolders)*rounds {
		t.Fatalf("%d turns, want %d", sec.turns, (goHolders+javaHolders)*rounds)
	}
	if byMessage.Load() == 0 {
		t.Error("no Java waiter was woken by a message")
	}
	if n, err := cl.GetPermitExpirableSemaphore(name).AvailablePermits(ctx); n != k || err != nil {
		t.Fatalf("%d permits free after every holder left (%v), want %d", n, err, k)
	}
}

// javaRounds takes and releases a permit of name rounds times, leased for
// 30s, each time inside sec, and returns how many tries a message caused.
func javaRounds(ctx context.Context, t *testing.T, j *javaClient, name, who string, rounds int, sec *counted) int {
	byMessage := 0
	for range rounds {
		id, n, err := j.semAcquire(ctx, t, name, 30*time.Second)
		if err != nil {
			t.Errorf("%s: %v", who, err)
			return byMessage
		}
		byMessage += n
		sec.enter(who)
		if ok, err := j.semRelease(ctx, name, id); !ok || err != nil {
			t.Errorf("%s release: %v %v", who, ok, err)
		}
	}
	return byMessage
}

// testSemWakes: with one permit, a Go release wakes a Java waiter and a
// Java release a Go waiter (an hour's backoff), both permits leased for
// 30s, past the test's bound: only the message gets either in.
func testSemWakes(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semwakes-" + uuid()
	cl := newClient(t, c, redisson.WithBackOff(patient))
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if ok, err := j.semTrySet(ctx, name, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	p, err := sem.Acquire(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	javaGot := make(chan string, 1)
	go func() {
		id, n, err := j.semAcquire(ctx, t, name, 30*time.Second)
		if err != nil || n == 0 {
			t.Errorf("Java waiter: %v, woken by %d messages", err, n)
		}
		javaGot <- id
	}()
	waitSubscribers(t, c, sem.Channel())
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	id := <-javaGot
	if id == "" {
		t.FailNow()
	}
	goGot := make(chan error, 1)
	go func() {
		p, err := sem.Acquire(ctx, 30*time.Second)
		if err == nil {
			err = p.Release(ctx)
		}
		goGot <- err
	}()
	waitSubscribers(t, c, sem.Channel())
	if ok, err := j.semRelease(ctx, name, id); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := <-goGot; err != nil {
		t.Fatalf("Go waiter: %v (only the Java release's message could wake it in time)", err)
	}
}

// testSemDeadJavaPermit: a Java permit leased for 300ms and never
// released is reclaimed once expired, and the Go waiter (an hour's
// backoff, no message ever sent) gets in when it looks again at that
// expiry, which its acquire was told.
func testSemDeadJavaPermit(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semdead-" + uuid()
	cl := newClient(t, c, redisson.WithBackOff(patient))
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	dead, _, err := j.semTry(ctx, name, 300*time.Millisecond)
	if dead == "" || err != nil {
		t.Fatal(dead, err)
	}
	p, err := sem.Acquire(ctx, 30*time.Second)
	if err != nil {
		t.Fatalf("Go waiter behind a dead Java permit: %v", err)
	}
	if ok, err := j.semRelease(ctx, name, dead); ok || err != nil {
		t.Fatalf("the dead Java permit was still held after the Go acquire: %v %v", ok, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testSemGoPermitEndsFirst: a Go permit leased for 3s (drift a fifth of
// it) has its context ended, with a cause wrapping lease.ErrLost, before
// a Java waiter reclaims it: checked at the moment Java's acquire
// returns. Its Release then finds it gone (lease.ErrNotHeld).
func testSemGoPermitEndsFirst(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semgoends-" + uuid()
	cl := newClient(t, c, redisson.WithDrift(0.2, 0))
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	p, err := sem.Acquire(ctx, 3*time.Second) // a 600ms margin: a loaded machine delays timers
	if err != nil {
		t.Fatal(err)
	}
	if p.Err() != nil {
		t.Fatalf("a fresh permit ended: %v", p.Err())
	}
	id, _, err := j.semAcquire(ctx, t, name, 30*time.Second)
	ended := p.Context().Err()
	if id == "" || err != nil {
		t.Fatal(id, err)
	}
	if ended == nil {
		t.Fatal("Java reclaimed the Go permit while its context was alive")
	}
	if cause := p.Err(); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want lease.ErrLost", cause)
	}
	if err := p.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of a reclaimed permit: %v, want lease.ErrNotHeld", err)
	}
	if err := p.UpdateLeaseTime(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("update of a reclaimed permit: %v, want lease.ErrNotHeld", err)
	}
	_, _ = j.semRelease(ctx, name, id)
}

// testSemReleaseErrors: a release of an id never taken, one released
// already, or one expired (given back all the same, as Java's) is
// lease.ErrNotHeld.
func testSemReleaseErrors(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semrelease-" + uuid()
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if err := sem.AddPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, "00112233445566778899aabbccddeeff"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of an id never taken: %v", err)
	}
	// What is no id is refused as such, before any round trip.
	if err := sem.Release(ctx, "not hex"); !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), "is no permit id") {
		t.Fatalf("release of no id: %v", err)
	}
	if err := sem.ReleaseIDs(ctx, "00112233445566778899aabbccddeeff", "not hex"); !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), `"not hex" is no permit id; none was released`) {
		t.Fatalf("ReleaseIDs with no id among them: %v", err)
	}
	if _, err := sem.LeaseTime(ctx, ""); !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), "is no permit id") {
		t.Fatalf("LeaseTime of no id: %v", err)
	}
	p, err := sem.TryAcquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.Err(), lease.ErrReleased) {
		t.Fatalf("a released permit's cause: %v", p.Err())
	}
	if err := p.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a second release: %v", err)
	}
	byID, err := sem.TryAcquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, byID.ID()); err != nil || !errors.Is(byID.Err(), lease.ErrReleased) {
		t.Fatalf("a Permit released by its id: %v, its cause %v", err, byID.Err())
	}
	expired, _, err := j.semTry(ctx, name, 50*time.Millisecond)
	if expired == "" || err != nil {
		t.Fatal(expired, err)
	}
	time.Sleep(100 * time.Millisecond) // past its expiry, not reclaimed: nobody looked
	if err := sem.Release(ctx, expired); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of an expired permit: %v", err)
	}
	if n, err := j.semAvailable(ctx, name); n != 2 || err != nil {
		t.Fatalf("Java reads %d permits free (%v), want 2: the expired one given back once", n, err)
	}
}

// testSemAgrees: what Go sets, adds and takes is what a Java client
// reads, and the other way round; the keys are Redisson's, under a name
// prefix (a NameMapper on Java's side); then semIDsAgree.
func testSemAgrees(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	base := "semagree-" + uuid()
	cl := newClient(t, c, redisson.WithNamePrefix("app1:"))
	sem := cl.GetPermitExpirableSemaphore(base)
	name := "app1:" + base // Java's mapped name
	j := newJava(c, 30*time.Second)
	value, timeouts, channel := semKeys(name)
	if sem.Key() != value || sem.TimeoutsKey() != timeouts || sem.Channel() != channel {
		t.Fatalf("keys %s %s %s, want %s %s %s", sem.Key(), sem.TimeoutsKey(), sem.Channel(), value, timeouts, channel)
	}
	if ok, err := sem.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := j.semTrySet(ctx, name, 5); ok || err != nil {
		t.Fatalf("Java set permits Go had set: %v %v", ok, err)
	}
	if ok, err := sem.TrySetPermits(ctx, 5); ok || err != nil {
		t.Fatalf("Go set permits again: %v %v", ok, err)
	}
	avail := func(want int64) {
		t.Helper()
		n, err := j.semAvailable(ctx, name)
		g, gerr := sem.AvailablePermits(ctx)
		if n != want || int64(g) != want || err != nil || gerr != nil {
			t.Fatalf("Java reads %d (%v), Go %d (%v), want %d", n, err, g, gerr, want)
		}
	}
	avail(3)
	if err := sem.AddPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	avail(5)
	if err := j.semAdd(ctx, name, -1); err != nil {
		t.Fatal(err)
	}
	avail(4)
	semIDsAgree(ctx, t, c, cl, sem, j, name, avail)
}

// semIDsAgree: Go's permits have Redisson's ids and expiries, each side
// releases the other's permit by its id, UpdateLeaseTime moves a permit's
// expiry and deadline, and Close gives a permit back.
func semIDsAgree(ctx context.Context, t *testing.T, c redis.UniversalClient, cl *redisson.Client, sem *redisson.PermitSemaphore, j *javaClient, name string, avail func(int64)) {
	_, timeouts, _ := semKeys(name)
	before := time.Now().UnixMilli()
	p, err := sem.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	avail(3)
	if len(p.ID()) != 32 {
		t.Fatalf("id %q, want 32 hex digits", p.ID())
	}
	score := c.ZScore(ctx, timeouts, string(mustHex(t, p.ID()))).Val()
	if int64(score) < before+time.Minute.Milliseconds() || int64(score) > time.Now().UnixMilli()+time.Minute.Milliseconds() {
		t.Fatalf("expiry %v, want now + 1m in ms", score)
	}
	forever, err := sem.TryAcquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.ZScore(ctx, timeouts, string(mustHex(t, forever.ID()))).Val(); int64(s) != jForever {
		t.Fatalf("a permit without a lease time has expiry %v, want %d", s, int64(jForever))
	}
	if _, ok := forever.Deadline(); ok || forever.Err() != nil {
		t.Fatal("a permit without a lease time has a local deadline")
	}
	if ok, err := j.semRelease(ctx, name, p.ID()); !ok || err != nil {
		t.Fatalf("Java released a Go permit: %v %v", ok, err)
	}
	id, _, err := j.semTry(ctx, name, time.Minute)
	if id == "" || err != nil {
		t.Fatal(id, err)
	}
	if err := sem.Release(ctx, id); err != nil {
		t.Fatalf("Go released a Java permit: %v", err)
	}
	if err := forever.UpdateLeaseTime(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d, ok := forever.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Fatalf("deadline %v after UpdateLeaseTime(1m)", d)
	}
	if s := c.ZScore(ctx, timeouts, string(mustHex(t, forever.ID()))).Val(); int64(s) == jForever {
		t.Fatal("UpdateLeaseTime left the expiry")
	}
	avail(3)
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(forever.Err(), lease.ErrClosed) {
		t.Fatalf("cause %v after Close", forever.Err())
	}
	avail(4) // Close gave the permit back
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
