package redisson_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// What a RedissonClient sends for an RPermitExpirableSemaphore's
// operations on several permits and its getLeaseTime, from Redisson
// 3.52.0's source (RedissonPermitExpirableSemaphore): acquire(n) and
// tryAcquire(n, ...) send jSemAcquire with n ids (semTryN).

// tryReleaseAsync(permitsIds): nothing when any id is gone or expired,
// else reclaim, remove them all and publish their number.
var jSemReleaseIDs = redis.NewScript(`
for i = 4, #ARGV, 1 do
  local expire = redis.call('zscore', KEYS[3], ARGV[i])
  if expire == false or tonumber(expire) <= tonumber(ARGV[2]) then return 0 end
end
local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1)
if #expiredIds > 0 then
  redis.call('zrem', KEYS[3], unpack(expiredIds))
  local value = redis.call('incrby', KEYS[1], #expiredIds)
  if tonumber(value) > 0 then redis.call(ARGV[3], KEYS[2], value) end
end
local keys = {}
for i = 4, #ARGV, 1 do table.insert(keys, ARGV[i]) end
local removed = redis.call('zrem', KEYS[3], unpack(keys))
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[3], KEYS[2], removed)
return removed`)

// getLeaseTimeAsync: -1 without a lease time, the ms left, or 0 when the
// id is not taken (Java then throws).
var jSemLeaseTime = redis.NewScript(`
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1)
if #expiredIds > 0 then
  redis.call('zrem', KEYS[2], unpack(expiredIds))
  local value = redis.call('incrby', KEYS[1], #expiredIds)
  if tonumber(value) > 0 then redis.call(ARGV[4], KEYS[3], value) end
end
local value = redis.call('zscore', KEYS[2], ARGV[1])
if (value ~= false) then
  return tonumber(value) == tonumber(ARGV[2]) and -1 or tonumber(value) - tonumber(ARGV[3])
end
return 0`)

// semTryN is tryAcquire(n) with a lease time (0: none): the n ids, or
// none and the earliest expiry answered (-1: none).
func (j *javaClient) semTryN(ctx context.Context, name string, n int, leaseTime time.Duration) ([]string, int64, error) {
	now := time.Now().UnixMilli()
	expiry := int64(jForever)
	if leaseTime > 0 {
		expiry = now + leaseTime.Milliseconds()
	}
	args := []any{n, expiry, now, jForever, j.publish}
	ids := make([]string, n)
	for i := range ids {
		var id [16]byte
		_, _ = rand.Read(id[:])
		ids[i] = hex.EncodeToString(id[:])
		args = append(args, id[:])
	}
	v, t, ch := semKeys(name)
	r, err := jSemAcquire.Run(ctx, j.c, []string{v, t, ch}, args...).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, -1, nil
	case err != nil:
		return nil, 0, err
	case r == "OK":
		return ids, 0, nil
	}
	at, err := strconv.ParseInt(r[1:], 10, 64)
	return nil, at, err
}

// semReleaseIDs is tryRelease(List<String>): the number released.
func (j *javaClient) semReleaseIDs(ctx context.Context, name string, ids ...string) (int64, error) {
	args := []any{len(ids), time.Now().UnixMilli(), j.publish}
	for _, id := range ids {
		raw, err := hex.DecodeString(id)
		if err != nil {
			return 0, err
		}
		args = append(args, raw)
	}
	v, t, ch := semKeys(name)
	return jSemReleaseIDs.Run(ctx, j.c, []string{v, ch, t}, args...).Int64()
}

// semLeaseTime is getLeaseTime(permitId)'s script: Java's answer.
func (j *javaClient) semLeaseTime(ctx context.Context, name, id string) (int64, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return 0, err
	}
	v, t, ch := semKeys(name)
	return jSemLeaseTime.Run(ctx, j.c, []string{v, t, ch}, raw, jForever, time.Now().UnixMilli(), j.publish).Int64()
}

func permitIDs(ps []*redisson.Permit) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID()
	}
	return ids
}

// taken returns the ids in a semaphore's timeouts, as hex, sorted.
func taken(ctx context.Context, t *testing.T, c redis.UniversalClient, sem *redisson.PermitSemaphore) []string {
	t.Helper()
	raw, err := c.ZRange(ctx, sem.TimeoutsKey(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(raw))
	for i, r := range raw {
		ids[i] = hex.EncodeToString([]byte(r))
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids []string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

// testSemAcquireNJava: Go's AcquireN writes what Java's acquire(n)
// writes (n ids, one expiry), a Java acquire(n) is refused when fewer are
// free and takes none, each side releases the other's several permits by
// their ids with Java's all-or-none release, and the free count agrees.
func testSemAcquireNJava(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semn-" + uuid()
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if ok, err := j.semTrySet(ctx, name, 5); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := time.Now().UnixMilli()
	ps, err := sem.AcquireN(ctx, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := taken(ctx, t, c, sem); len(ps) != 3 || !slices.Equal(got, sorted(permitIDs(ps))) {
		t.Fatalf("Go took %v, the server holds %v", permitIDs(ps), got)
	}
	for _, p := range ps {
		score := int64(c.ZScore(ctx, sem.TimeoutsKey(), string(mustHex(t, p.ID()))).Val())
		if score < before+time.Minute.Milliseconds() || score > time.Now().UnixMilli()+time.Minute.Milliseconds() {
			t.Fatalf("permit %s expiry %d, want now + 1m", p.ID(), score)
		}
	}
	if ids, _, err := j.semTryN(ctx, name, 3, 0); ids != nil || err != nil {
		t.Fatalf("Java's tryAcquire(3) with 2 free: %v %v", ids, err)
	}
	if n, err := j.semAvailable(ctx, name); n != 2 || err != nil {
		t.Fatalf("Java reads %d free (%v) after a refused acquire(3), want 2", n, err)
	}
	jids, _, err := j.semTryN(ctx, name, 2, time.Minute)
	if len(jids) != 2 || err != nil {
		t.Fatal(jids, err)
	}
	if _, err := sem.TryAcquireN(ctx, 1, 0); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquireN(1) with none free: %v", err)
	}
	if n, err := j.semReleaseIDs(ctx, name, permitIDs(ps[:2])...); n != 2 || err != nil {
		t.Fatalf("Java released 2 Go permits: %d %v", n, err)
	}
	if err := sem.ReleaseIDs(ctx, jids...); err != nil {
		t.Fatalf("Go released Java's 2 permits: %v", err)
	}
	if err := ps[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := j.semAvailable(ctx, name); n != 5 || err != nil {
		t.Fatalf("Java reads %d free (%v) after every release, want 5", n, err)
	}
}

// testSemAcquireNWaits: an AcquireN(2) with one permit free takes none
// while it waits (the server holds only Java's), and gets both when a
// Java release frees a second, woken by its message (an hour's backoff).
func testSemAcquireNWaits(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semnwait-" + uuid()
	cl := newClient(t, c, redisson.WithBackOff(patient))
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if ok, err := sem.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatal(ok, err)
	}
	jids, _, err := j.semTryN(ctx, name, 2, 0)
	if len(jids) != 2 || err != nil {
		t.Fatal(jids, err)
	}
	type result struct {
		ps  []*redisson.Permit
		err error
	}
	got := make(chan result, 1)
	go func() {
		ps, err := sem.AcquireN(ctx, 2, 30*time.Second)
		got <- result{ps, err}
	}()
	waitSubscribers(t, c, sem.Channel())
	if ids := taken(ctx, t, c, sem); !slices.Equal(ids, sorted(jids)) {
		t.Fatalf("while AcquireN(2) waits the server holds %v, want Java's %v alone", ids, sorted(jids))
	}
	if n, err := j.semReleaseIDs(ctx, name, jids[0]); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	r := <-got
	if r.err != nil || len(r.ps) != 2 {
		t.Fatalf("AcquireN(2) after Java's release: %v %v (only its message could wake it)", r.ps, r.err)
	}
	if ids := taken(ctx, t, c, sem); !slices.Equal(ids, sorted(append(permitIDs(r.ps), jids[1]))) {
		t.Fatalf("the server holds %v", ids)
	}
	if err := sem.ReleaseIDs(ctx, append(permitIDs(r.ps), jids[1])...); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.ps {
		if !errors.Is(p.Err(), lease.ErrReleased) {
			t.Fatalf("a Permit released by ReleaseIDs: cause %v", p.Err())
		}
	}
}

// testSemReleaseIDs: ReleaseIDs is all or none, as Java's
// tryRelease(List): an id never taken, or one expired, among them leaves
// every permit taken (and its Permit alive), with an error wrapping
// lease.ErrNotHeld that names it; no ids or one twice is refused.
func testSemReleaseIDs(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semrelids-" + uuid()
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if err := sem.SetPermits(ctx, 4); err != nil {
		t.Fatal(err)
	}
	ps, err := sem.TryAcquireN(ctx, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := permitIDs(ps)
	const never = "00112233445566778899aabbccddeeff"
	err = sem.ReleaseIDs(ctx, ids[0], never, ids[1])
	if !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), never) {
		t.Fatalf("ReleaseIDs with an id never taken: %v, want lease.ErrNotHeld naming it", err)
	}
	expired, _, err := j.semTry(ctx, name, 50*time.Millisecond)
	if expired == "" || err != nil {
		t.Fatal(expired, err)
	}
	time.Sleep(100 * time.Millisecond) // past its expiry, not reclaimed: nobody looked
	if err := sem.ReleaseIDs(ctx, ids[2], expired); !errors.Is(err, lease.ErrNotHeld) || !strings.Contains(err.Error(), expired) {
		t.Fatalf("ReleaseIDs with an expired id: %v, want lease.ErrNotHeld naming it", err)
	}
	if got := taken(ctx, t, c, sem); !slices.Equal(got, sorted(append(slices.Clone(ids), expired))) {
		t.Fatalf("after refused releases the server holds %v, want every permit", got)
	}
	for _, p := range ps {
		if p.Err() != nil {
			t.Fatalf("a refused release ended permit %s: %v", p.ID(), p.Err())
		}
	}
	for _, bad := range [][]string{nil, {ids[0], ids[0]}} {
		if err := sem.ReleaseIDs(ctx, bad...); !errors.Is(err, lease.ErrInvalidOption) {
			t.Fatalf("ReleaseIDs(%v): %v, want lease.ErrInvalidOption", bad, err)
		}
	}
	if err := sem.ReleaseIDs(ctx, ids[2], ids[0]); err != nil {
		t.Fatal(err)
	}
	// The expired one was reclaimed first, as Java's does.
	if got := taken(ctx, t, c, sem); !slices.Equal(got, []string{ids[1]}) {
		t.Fatalf("the server holds %v, want %s alone", got, ids[1])
	}
	if n, err := sem.AvailablePermits(ctx); n != 3 || err != nil {
		t.Fatalf("%d free (%v), want 3", n, err)
	}
	if ps[1].Err() != nil || !errors.Is(ps[0].Err(), lease.ErrReleased) {
		t.Fatalf("causes %v, %v", ps[0].Err(), ps[1].Err())
	}
}

// testSemLeaseTime: LeaseTime answers what Java's getLeaseTime answers,
// for Go's permits and Java's: the time left, negative without a lease
// time, and lease.ErrNotHeld for an id not taken (Java's 0, then its
// exception), which ends a Go Permit so found gone.
func testSemLeaseTime(t *testing.T, c redis.UniversalClient) {
	ctx := bounded(t, 20*time.Second)
	name := "semlease-" + uuid()
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore(name)
	j := newJava(c, 30*time.Second)
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	p, err := sem.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	jid, _, err := j.semTry(ctx, name, 0)
	if jid == "" || err != nil {
		t.Fatal(jid, err)
	}
	left, err := sem.LeaseTime(ctx, p.ID())
	jleft, jerr := j.semLeaseTime(ctx, name, p.ID())
	if err != nil || jerr != nil || left <= 0 || left > time.Minute || jleft <= 0 || jleft > time.Minute.Milliseconds() {
		t.Fatalf("a 1m permit: Go %v (%v), Java %d (%v)", left, err, jleft, jerr)
	}
	if left, err := sem.LeaseTime(ctx, jid); left >= 0 || err != nil {
		t.Fatalf("Java's permit without a lease time: %v %v, want negative", left, err)
	}
	if n, err := j.semLeaseTime(ctx, name, jid); n != -1 || err != nil {
		t.Fatalf("Java's answer for it: %d %v, want -1", n, err)
	}
	if ok, err := j.semRelease(ctx, name, p.ID()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if n, err := j.semLeaseTime(ctx, name, p.ID()); n != 0 || err != nil {
		t.Fatalf("Java's answer for a released id: %d %v, want 0", n, err)
	}
	if _, err := sem.LeaseTime(ctx, p.ID()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("LeaseTime of a released id: %v, want lease.ErrNotHeld", err)
	}
	if !errors.Is(p.Err(), lease.ErrLost) {
		t.Fatalf("a Permit LeaseTime found gone: cause %v, want lease.ErrLost", p.Err())
	}
	if _, err := sem.LeaseTime(ctx, "not hex"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("LeaseTime of no id: %v", err)
	}
}

// TestAcquireNRefusesBadCounts: fewer than one permit is refused before
// any round trip.
func TestAcquireNRefusesBadCounts(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	sem := newClient(t, c).GetPermitExpirableSemaphore("semnbad-" + uuid())
	for _, n := range []int{0, -1} {
		if _, err := sem.TryAcquireN(context.Background(), n, 0); !errors.Is(err, lease.ErrInvalidOption) {
			t.Fatalf("TryAcquireN(%d): %v", n, err)
		}
	}
}

// TestLateAcquireNReplyGivenBack: a TryAcquireN whose reply comes after
// its local deadline, before the permits' expiry, returns
// lease.ErrNotAcquired and releases every one of them (S1).
func TestLateAcquireNReplyGivenBack(t *testing.T) {
	const leaseTime = 4 * time.Second
	ctx := bounded(t, time.Minute)
	name := uniqueName(t)
	admin := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = admin.Close() })
	s0 := newClient(t, admin).GetPermitExpirableSemaphore(name)
	if err := s0.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	hook := newReplyHook(acquireReplies(s0.TimeoutsKey()))
	hook.held.Store(1)
	cl := newClient(t, hookedClient(t, hook), redisson.WithDrift(0.5, 0))
	hook.openAfter(ctx, leaseTime/2+50*time.Millisecond)
	ps, err := cl.GetPermitExpirableSemaphore(name).TryAcquireN(ctx, 3, leaseTime)
	if err == nil {
		t.Fatalf("TryAcquireN handed over %d Permits answered past their deadline", len(ps))
	}
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquireN: %v, want ErrNotAcquired", err)
	}
	// Read raw: AvailablePermits would reclaim an expired permit.
	if n, free := admin.ZCard(ctx, s0.TimeoutsKey()).Val(), admin.Get(ctx, name).Val(); n != 0 || free != "3" {
		t.Fatalf("the late permits were not released: %d taken, %q free", n, free)
	}
}

// TestCloseGivesBackAcquireN: Close gives back every permit of an
// AcquireN, and ends each with lease.ErrClosed.
func TestCloseGivesBackAcquireN(t *testing.T) {
	ctx := bounded(t, 20*time.Second)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore("semnclose-" + uuid())
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	ps, err := sem.AcquireN(ctx, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !errors.Is(p.Err(), lease.ErrClosed) {
			t.Fatalf("cause %v after Close", p.Err())
		}
	}
	if n := c.ZCard(ctx, sem.TimeoutsKey()).Val(); n != 0 || c.Get(ctx, sem.Key()).Val() != "3" {
		t.Fatalf("%d permits taken after Close", n)
	}
}

// TestSemNCommandsAsDocumented runs AcquireN and TryAcquireN,
// ReleaseIDs (refused and applied, reclaiming an expired permit) and
// LeaseTime under MONITOR and checks that they send only what
// docs/security.md lists (sent, commands_test.go).
func TestSemNCommandsAsDocumented(t *testing.T) {
	srv := redistest.Start(t)
	mon := srv.Monitor(t)
	c := srv.Client(t)
	ctx := bounded(t, 20*time.Second)
	cl := newClient(t, c)
	sem := cl.GetPermitExpirableSemaphore("semndocs")
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	ps, err := sem.AcquireN(ctx, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short, err := sem.TryAcquireN(ctx, 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.LeaseTime(ctx, ps[0].ID()); err != nil {
		t.Fatal(err)
	}
	<-short[0].Done()
	time.Sleep(60 * time.Millisecond) // its expiry passed too
	if err := sem.ReleaseIDs(ctx, ps[0].ID(), short[0].ID()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
	if err := sem.ReleaseIDs(ctx, permitIDs(ps)...); err != nil {
		t.Fatal(err)
	}
	if _, err := sem.LeaseTime(ctx, ps[0].ID()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
	_ = cl.Close()
	for _, cmd := range mon.Stop(t) {
		if len(cmd.Args) == 0 || strings.EqualFold(cmd.Args[0], "monitor") {
			continue
		}
		who := "client"
		if cmd.Client == "lua" {
			who = "lua"
		}
		if name := strings.ToUpper(cmd.Args[0]); !slices.Contains(sent[who], name) {
			t.Errorf("%s sent %v, which docs/security.md does not list", who, cmd.Args)
		}
	}
}
