package backend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// The contract: what every Backend answers, run against the in-memory Fake
// (which the synctest tests of lease and watchdog, and package leasetest,
// stand on) and against Redis, so that a test passing on the fake says
// something about Redis. They answer alike: leases, reentrant locks, the
// fair queue, semaphores' permits, Available and Downgrade.

func TestContractFake(t *testing.T) {
	runContract(t, func(*testing.T) backend.Backend { return backend.NewFake() })
}

func TestContractRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	// One server; each subtest's keys under a prefix of its own.
	runContract(t, func(t *testing.T) backend.Backend {
		return backend.NewRedis(client, strings.ReplaceAll(t.Name(), "/", ":")+":")
	})
}

// runContract runs every contract test against a fresh backend from
// newBackend.
func runContract(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	tests := []struct {
		name string
		run  func(c contract)
	}{
		{"AcquireHeldAndTTL", contractAcquire},
		{"ResendAnsweredTheSame", contractResend},
		{"FencesStrictlyIncrease", contractFences},
		{"RenewNeverShortensAndComparesToken", contractRenew},
		{"ReleaseComparesAndFrees", contractRelease},
		{"ReleaseResentAnsweredAsTheFirst", contractReleaseResent},
		{"ReleaseMemory", contractReleaseMemory},
		{"AbandonBeforeAndAfterTheAcquire", contractAbandon},
		{"RetiredTokensAreRefused", contractRetired},
		{"ReentrantCounts", contractReentrant},
		{"ReentrantResentExitAndEntry", contractReentrantResent},
		{"ReentrantEntriesOnce", contractReentrantEntriesOnce},
		{"ReentrantReleaseOfAnOlderHold", contractReentrantOlderHold},
		{"ExpiryFreesTheName", contractExpiry},
		{"FairQueue", contractFair},
		{"FairAbandonLeavesTheQueue", contractFairAbandon},
		{"Permits", contractPermits},
		{"PermitsExpire", contractPermitsExpire},
		{"PermitsOfOneKind", contractPermitsKind},
		{"PermitLimitStored", contractPermitLimit},
		{"KPermitsAtOnce", contractPermitsK},
		{"FairPermits", contractFairPermits},
		{"Available", contractAvailable},
		{"Downgrade", contractDowngrade},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(contract{t: t, be: newBackend(t), ctx: context.Background()})
		})
	}
}

// contract is one contract test's backend, with helpers that fail the test
// on an error the test does not expect.
type contract struct {
	t   *testing.T
	be  backend.Backend
	ctx context.Context
}

func (c contract) acquire(req backend.Request) backend.Acquisition {
	c.t.Helper()
	a, err := c.be.Acquire(c.ctx, req)
	if err != nil {
		c.t.Fatalf("acquire %+v: %v", req, err)
	}
	return a
}

// mustAcquire acquires and fails unless the request holds the name.
func (c contract) mustAcquire(req backend.Request) backend.Acquisition {
	c.t.Helper()
	a := c.acquire(req)
	if !a.Acquired {
		c.t.Fatalf("acquire %+v: not acquired: %+v", req, a)
	}
	return a
}

func (c contract) renew(items ...backend.Item) []error {
	errs := make([]error, len(items))
	c.be.Renew(c.ctx, items, errs)
	return errs
}

func (c contract) release(items ...backend.Item) []error {
	errs := make([]error, len(items))
	c.be.Release(c.ctx, items, errs)
	return errs
}

// held reports whether it holds its name, without changing anything: a
// renewal to a TTL shorter than any left does nothing (S8).
func (c contract) held(it backend.Item) bool {
	c.t.Helper()
	it.TTL = time.Millisecond
	switch err := c.renew(it)[0]; {
	case err == nil:
		return true
	case errors.Is(err, backend.ErrNotHeld):
		return false
	default:
		c.t.Fatalf("renew %+v: %v", it, err)
		return false
	}
}

// holderTTL is the name's remaining TTL as a waiter is told it.
func (c contract) holderTTL(name string) time.Duration {
	c.t.Helper()
	a := c.acquire(backend.Request{Name: name, Token: "probe-" + name, TTL: time.Minute})
	if a.Acquired {
		c.t.Fatalf("%s: free, want held", name)
	}
	return a.HolderTTL
}

func lease(name, token string, ttl time.Duration) backend.Request {
	return backend.Request{Name: name, Token: token, TTL: ttl}
}

func contractAcquire(c contract) {
	a := c.mustAcquire(lease("n", "tok1", time.Minute))
	if a.Count != 1 || a.Fence <= 0 || a.Retired {
		c.t.Fatalf("first acquire: %+v", a)
	}
	b := c.acquire(lease("n", "tok2", time.Minute))
	if b.Acquired || b.Retired || b.HolderTTL <= 59*time.Second || b.HolderTTL > time.Minute || b.Arrival != 0 {
		c.t.Fatalf("held by another token: %+v, want the holder's TTL of about 1m", b)
	}
	if !c.held(lease("n", "tok1", time.Minute).Item()) || c.held(lease("n", "tok2", time.Minute).Item()) {
		c.t.Fatal("the refused request holds the name, or the first does not")
	}
}

// A client library resends a request whose reply was lost: the copy gets
// the first answer.
func contractResend(c contract) {
	a := c.mustAcquire(lease("n", "tok", time.Minute))
	again := c.mustAcquire(lease("n", "tok", time.Minute))
	if again.Fence != a.Fence || again.Count != 1 {
		c.t.Fatalf("resend: %+v, first %+v", again, a)
	}
}

// S5: every acquisition's fence is above every earlier one of the name,
// releases in between or not.
func contractFences(c contract) {
	var last int64
	for i, tok := range []string{"t1", "t2", "t3", "t4"} {
		a := c.mustAcquire(lease("n", tok, time.Minute))
		if a.Fence <= last {
			c.t.Fatalf("acquisition %d: fence %d after %d", i, a.Fence, last)
		}
		last = a.Fence
		if err := c.release(lease("n", tok, time.Minute).Item())[0]; err != nil {
			c.t.Fatalf("release %s: %v", tok, err)
		}
	}
	r := c.mustAcquire(backend.Request{Name: "n", Token: "op", Owner: "o", TTL: time.Minute})
	if r.Fence <= last {
		c.t.Fatalf("a reentrant lock's first entry: fence %d after %d", r.Fence, last)
	}
}

// S3, S8: a renewal compares the token and never shortens the TTL.
func contractRenew(c contract) {
	c.mustAcquire(lease("n", "tok", time.Second))
	errs := c.renew(
		backend.Item{Name: "n", Token: "tok", TTL: time.Minute},
		backend.Item{Name: "n", Token: "other", TTL: time.Hour},
		backend.Item{Name: "missing", Token: "tok", TTL: time.Minute},
	)
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrNotHeld) || !errors.Is(errs[2], backend.ErrNotHeld) {
		c.t.Fatalf("renew as holder, other token, missing name: %v", errs)
	}
	// Why it is not held (lease.LossTakenOver or LossDeleted): the free
	// name's answer is ErrGone, the held one's is not.
	if errors.Is(errs[1], backend.ErrGone) || !errors.Is(errs[2], backend.ErrGone) {
		c.t.Fatalf("renew by another token, of a missing name: %v; want only the second ErrGone", errs[1:])
	}
	if ttl := c.holderTTL("n"); ttl <= 59*time.Second || ttl > time.Minute {
		c.t.Fatalf("TTL %v after a renewal to 1m (the other token's 1h must not apply)", ttl)
	}
	if err := c.renew(backend.Item{Name: "n", Token: "tok", TTL: time.Second})[0]; err != nil {
		c.t.Fatal(err)
	}
	if ttl := c.holderTTL("n"); ttl <= 59*time.Second {
		c.t.Fatalf("a renewal with 1s shortened the TTL to %v", ttl)
	}
	if c.held(backend.Item{Name: "missing", Token: "tok"}) {
		c.t.Fatal("a renewal of a free name took it")
	}
}

// S3: a release compares the token and frees the name.
func contractRelease(c contract) {
	c.mustAcquire(lease("n", "tok", time.Minute))
	if err := c.release(backend.Item{Name: "n", Token: "other"})[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("release with another token: %v", err)
	}
	if !c.held(backend.Item{Name: "n", Token: "tok"}) {
		c.t.Fatal("another token's release touched the lease")
	}
	if err := c.release(backend.Item{Name: "n", Token: "tok", TTL: time.Minute})[0]; err != nil {
		c.t.Fatalf("release: %v", err)
	}
	c.mustAcquire(lease("n", "next", time.Minute))
	if err := c.release(backend.Item{Name: "free", Token: "tok"})[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("release of a free name: %v", err)
	}
}

// A release is remembered: a copy resent after a lost reply gets the first
// answer, and touches nothing, not even a holder that came since.
func contractReleaseResent(c contract) {
	it := lease("n", "tok", time.Minute).Item()
	c.mustAcquire(lease("n", "tok", time.Minute))
	if err := c.release(it)[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.release(it)[0]; err != nil {
		c.t.Fatalf("resent release: %v, want the first answer (nil)", err)
	}
	c.mustAcquire(lease("n", "next", time.Minute))
	if err := c.release(it)[0]; err != nil {
		c.t.Fatalf("release resent after another holder came: %v, want the first answer (nil)", err)
	}
	if !c.held(backend.Item{Name: "n", Token: "next"}) {
		c.t.Fatal("a resent release took the next holder's lease")
	}
}

// Item.Memory: a lease's or a permit's release remembered for a while, or
// not at all (lease.WithReleaseMemory); a reentrant lock's exits always.
func contractReleaseMemory(c contract) {
	// Forgotten: the resent copy finds the name free, and then another's.
	it := lease("f", "tok", time.Minute).Item()
	it.Memory = backend.Forget
	c.mustAcquire(lease("f", "tok", time.Minute))
	if err := c.release(it)[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.release(it)[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("resent release, not remembered: %v, want ErrNotHeld", err)
	}
	c.mustAcquire(lease("f", "next", time.Minute))
	if err := c.release(it)[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("release resent after another holder came, not remembered: %v, want ErrNotHeld", err)
	}
	if !c.held(backend.Item{Name: "f", Token: "next"}) {
		c.t.Fatal("a resent release took the next holder's lease")
	}

	// A permit, forgotten.
	c.mustAcquire(permit("p", "p1", 2))
	pit := permit("p", "p1", 2).Item()
	pit.Memory = backend.Forget
	if err := c.release(pit)[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.release(pit)[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("resent permit release, not remembered: %v, want ErrNotHeld", err)
	}

	// A reentrant lock ignores it: an inner exit applied twice would free
	// the name under its owner.
	req := backend.Request{Name: "r", Token: "req", TTL: time.Minute, Owner: "alice"}
	c.mustAcquire(req)
	enter := req.Item()
	enter.Op = "enter-1"
	if n, err := c.be.Reenter(c.ctx, enter); err != nil || n != 2 {
		c.t.Fatalf("reenter: %d %v, want 2", n, err)
	}
	exit := req.Item()
	exit.Op, exit.Count, exit.Memory = "exit-1", 1, backend.Forget
	for range 2 {
		if err := c.release(exit)[0]; err != nil {
			c.t.Fatalf("inner exit (and its copy): %v", err)
		}
	}
	if !c.held(req.Item()) {
		c.t.Fatal("a resent inner exit freed the name, though reentrant locks always remember")
	}
	final := req.Item()
	final.Op, final.Memory = "exit-2", backend.Forget
	for range 2 {
		if err := c.release(final)[0]; err != nil {
			c.t.Fatalf("final release (and its copy), remembered whatever Memory says: %v", err)
		}
	}

	// Remembered briefly: answered at first, then forgotten.
	short := lease("s", "tok", time.Minute).Item()
	short.Memory = 50 * time.Millisecond
	c.mustAcquire(lease("s", "tok", time.Minute))
	if err := c.release(short)[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.release(short)[0]; err != nil {
		c.t.Fatalf("release resent at once, remembered 50ms: %v, want nil", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := c.release(short)[0]
		if errors.Is(err, backend.ErrNotHeld) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			c.t.Fatalf("a release remembered 50ms still answered after 30s: %v", err)
		}
	}
}

// S7: Abandon takes back an acquire whose outcome is unknown, whether it
// arrived before or arrives after.
func contractAbandon(c contract) {
	c.mustAcquire(lease("a", "tok", time.Minute))
	if err := c.be.Abandon(c.ctx, lease("a", "tok", time.Minute)); err != nil {
		c.t.Fatal(err)
	}
	if c.held(backend.Item{Name: "a", Token: "tok"}) {
		c.t.Fatal("abandon left the applied lease")
	}

	if err := c.be.Abandon(c.ctx, lease("b", "late", time.Minute)); err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(lease("b", "late", time.Minute)); a.Acquired || !a.Retired {
		c.t.Fatalf("the abandoned request arriving late: %+v, want Retired", a)
	}
	if c.held(backend.Item{Name: "b", Token: "late"}) {
		c.t.Fatal("a late abandoned acquire left a phantom lease")
	}
	c.mustAcquire(lease("b", "fresh", time.Minute))
	if err := c.be.Abandon(c.ctx, lease("b", "late", time.Minute)); err != nil {
		c.t.Fatal(err)
	}
	if !c.held(backend.Item{Name: "b", Token: "fresh"}) {
		c.t.Fatal("abandon touched another holder's lease")
	}
}

// A retired token ({0, -2} from acquire.lua) is refused and touches
// nothing, whether abandoned or released; a fresh token is not blocked.
func contractRetired(c contract) {
	c.mustAcquire(lease("n", "tok", time.Minute))
	if err := c.release(lease("n", "tok", time.Minute).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(lease("n", "tok", time.Minute)); a.Acquired || !a.Retired || a.HolderTTL >= 0 {
		c.t.Fatalf("acquire under a released token: %+v, want Retired", a)
	}
	shared := backend.Request{Name: "r", Token: "t1", TTL: time.Minute, Owner: "job"}
	c.mustAcquire(shared)
	late := shared
	late.Token = "t2"
	if err := c.be.Abandon(c.ctx, late); err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(late); a.Acquired || !a.Retired {
		c.t.Fatalf("a shared owner's abandoned request arriving late: %+v, want Retired", a)
	}
	if n, err := c.be.Reenter(c.ctx, shared.Item()); err != nil || n != 2 {
		c.t.Fatalf("owner's count after the refused copy: reenter gives %d %v, want 2", n, err)
	}
}

// A reentrant lock: an owner enters again (through Acquire or Reenter) with
// the same fence; Release takes back Count entries, 0 all of them; a lease
// and another owner are refused.
func contractReentrant(c contract) {
	req := backend.Request{Name: "r", Token: "req1", TTL: time.Minute, Owner: "alice"}
	first := c.mustAcquire(req)
	if first.Count != 1 {
		c.t.Fatalf("first entry: %+v", first)
	}
	req2 := req
	req2.Token = "req2"
	if again := c.mustAcquire(req2); again.Count != 2 || again.Fence != first.Fence {
		c.t.Fatalf("the owner entering again: %+v, first %+v", again, first)
	}
	item := req.Item()
	if n, err := c.be.Reenter(c.ctx, item); err != nil || n != 3 {
		c.t.Fatalf("reenter: %d %v", n, err)
	}
	if a := c.acquire(backend.Request{Name: "r", Token: "x", TTL: time.Minute, Owner: "bob"}); a.Acquired {
		c.t.Fatalf("another owner: %+v", a)
	}
	if a := c.acquire(lease("r", "x", time.Minute)); a.Acquired || a.HolderTTL <= 0 {
		c.t.Fatalf("a lease on a reentrant lock: %+v", a)
	}
	if errs := c.renew(item, backend.Item{Name: "r", Token: "alice", TTL: time.Minute}); errs[0] != nil || !errors.Is(errs[1], backend.ErrNotHeld) {
		c.t.Fatalf("renew as owner and as a lease token: %v", errs)
	}
	if err := c.release(backend.Item{Name: "r", Token: "alice"})[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("a lease's release of a reentrant lock: %v", err)
	}
	one := item
	one.Count = 1
	if err := c.release(one)[0]; err != nil {
		c.t.Fatal(err)
	}
	if n, err := c.be.Reenter(c.ctx, item); err != nil || n != 3 {
		c.t.Fatalf("after an exit of one of 3 entries, reenter gives %d %v, want 3", n, err)
	}
	if err := c.release(item)[0]; err != nil || c.held(item) {
		c.t.Fatalf("release of all entries: %v", err)
	}
	if _, err := c.be.Reenter(c.ctx, item); !errors.Is(err, backend.ErrNotHeld) || c.held(item) {
		c.t.Fatalf("reenter of a free name: %v", err)
	}
	if third := c.mustAcquire(backend.Request{Name: "r", Token: "req3", TTL: time.Minute, Owner: "bob"}); third.Fence <= first.Fence {
		c.t.Fatalf("a new hold's fence %d, first %d", third.Fence, first.Fence)
	}
}

// An inner exit or a re-entry resent after a lost reply is not applied
// twice: twice would free the name under its owner.
func contractReentrantResent(c contract) {
	req := backend.Request{Name: "r", Token: "req", TTL: time.Minute, Owner: "alice"}
	c.mustAcquire(req)
	enter := req.Item()
	enter.Op = "enter-1"
	for range 2 {
		if n, err := c.be.Reenter(c.ctx, enter); err != nil || n != 2 {
			c.t.Fatalf("reenter (and its copy): %d %v, want 2", n, err)
		}
	}
	exit := req.Item()
	exit.Op, exit.Count = "exit-1", 1
	for range 2 {
		if err := c.release(exit)[0]; err != nil {
			c.t.Fatalf("inner exit (and its copy): %v", err)
		}
	}
	if !c.held(req.Item()) {
		c.t.Fatal("a resent inner exit freed the name")
	}
}

// contractReentrantOlderHold: an owner's hold expires and the owner (shared
// by another locker) takes the name again, a new hold with a new fence. A
// release of the old hold, inner exit or final, arriving now (a Lock lost
// to expiry still sends its release) is refused: it would take back the new
// hold's entries and free the name under its holder.
func contractReentrantOlderHold(c contract) {
	old := backend.Request{Name: "r", Token: "old", TTL: 100 * time.Millisecond, Owner: "alice"}
	f1 := c.mustAcquire(old).Fence
	for deadline := time.Now().Add(30 * time.Second); c.held(old.Item()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatal("a hold of 100ms still held after 30s")
		}
	}
	anew := backend.Request{Name: "r", Token: "new", TTL: time.Minute, Owner: "alice"}
	f2 := c.mustAcquire(anew).Fence
	if f2 <= f1 {
		c.t.Fatalf("fences %d then %d", f1, f2)
	}
	enter := anew.Item()
	enter.Op = "enter-new"
	if n, err := c.be.Reenter(c.ctx, enter); err != nil || n != 2 {
		c.t.Fatalf("reenter: %d %v, want 2", n, err)
	}
	for _, count := range []int{1, 0} { // an inner exit, then the final release
		late := old.Item()
		late.Op, late.Count, late.Fence = fmt.Sprintf("old-exit-%d", count), count, f1
		if err := c.release(late)[0]; !errors.Is(err, backend.ErrNotHeld) {
			c.t.Fatalf("release (count %d) of the expired hold of fence %d under the hold of fence %d: %v, want ErrNotHeld", count, f1, f2, err)
		}
	}
	exit := anew.Item()
	exit.Op, exit.Count, exit.Fence = "exit-new", 1, f2
	if err := c.release(exit)[0]; err != nil {
		c.t.Fatalf("inner exit of the new hold: %v", err)
	}
	if !c.held(anew.Item()) {
		c.t.Fatal("the new hold's inner exit freed the name: an older release took an entry")
	}
	final := anew.Item()
	final.Op, final.Fence = "final-new", f2
	if err := c.release(final)[0]; err != nil {
		c.t.Fatalf("final release of the new hold: %v", err)
	}
	if c.held(anew.Item()) {
		c.t.Fatal("held after the new hold's final release")
	}
}

// contractReentrantEntriesOnce: a reentrant request that entered is
// answered as the first time when resent, and Abandon takes back exactly
// its one entry; a re-entry taken back before it comes is refused.
func contractReentrantEntriesOnce(c contract) {
	first := backend.Request{Name: "s", Token: "t1", TTL: time.Minute, Owner: "job"}
	second := first
	second.Token = "t2"
	a1 := c.mustAcquire(first)
	for range 2 {
		if a := c.acquire(second); !a.Acquired || a.Count != 2 || a.Fence != a1.Fence {
			c.t.Fatalf("entering again (and its copy): %+v, want count 2", a)
		}
	}
	if a := c.acquire(first); !a.Acquired || a.Count != 1 {
		c.t.Fatalf("a copy of the first acquire: %+v, want its first answer", a)
	}
	for range 2 {
		if err := c.be.Abandon(c.ctx, second); err != nil {
			c.t.Fatal(err)
		}
	}
	if a := c.acquire(second); a.Acquired || !a.Retired {
		c.t.Fatalf("a copy after the abandon: %+v, want Retired", a)
	}
	in := first.Item()
	in.Op = "op1"
	if n, err := c.be.Reenter(c.ctx, in); err != nil || n != 2 {
		c.t.Fatalf("reenter after the abandon: %d %v, want 2", n, err)
	}
	if err := c.be.Abandon(c.ctx, backend.Request{Name: "s", Token: "op1", TTL: time.Minute, Owner: "job"}); err != nil {
		c.t.Fatal(err)
	}
	early := in
	early.Op = "op2"
	if err := c.be.Abandon(c.ctx, backend.Request{Name: "s", Token: "op2", TTL: time.Minute, Owner: "job"}); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.be.Reenter(c.ctx, early); !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("a re-entry after its take-back: %v, want ErrNotHeld", err)
	}
	last := first.Item()
	last.Count, last.Op = 1, "t1" // one entry left: its release frees the name
	if err := c.release(last)[0]; err != nil || c.held(first.Item()) {
		c.t.Fatalf("release of the one entry left: %v, held %v", err, c.held(first.Item()))
	}
	if a := c.acquire(first); a.Acquired {
		c.t.Fatalf("a copy of the first acquire after its release: %+v", a)
	}
}

func contractExpiry(c contract) {
	c.mustAcquire(lease("n", "tok", 100*time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	if c.held(backend.Item{Name: "n", Token: "tok"}) {
		c.t.Fatal("held after its TTL")
	}
	c.mustAcquire(lease("n", "next", time.Minute))
}

// contractFair: the name goes to fair waiters in the order they first
// asked; barging requests wait behind the queue; a waiter that leaves or
// stops asking loses its place.
func contractFair(c contract) {
	fair := func(tok string, patience time.Duration) backend.Request {
		return backend.Request{Name: "f", Token: tok, TTL: time.Minute, Queue: patience}
	}
	holder := lease("f", "h", time.Minute)
	c.mustAcquire(holder)
	w1, w2, w3 := fair("w1", 5*time.Second), fair("w2", 5*time.Second), fair("w3", 5*time.Second)
	a1, a2 := c.acquire(w1), c.acquire(w2)
	c.acquire(w3)
	if a1.Acquired || a2.Acquired || a1.Arrival <= 0 || a2.Arrival <= a1.Arrival {
		c.t.Fatalf("queued: %+v %+v, want arrivals in order", a1, a2)
	}
	if again := c.acquire(w1); again.Arrival != a1.Arrival {
		c.t.Fatalf("a waiter asking again moved in the queue: %+v, first %+v", again, a1)
	}
	if err := c.release(holder.Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(w2); a.Acquired || a.HolderTTL <= 0 || a.HolderTTL > 5*time.Second {
		c.t.Fatalf("w2 before its turn: %+v, want to wait at most w1's patience", a)
	}
	if a := c.acquire(lease("f", "barging", time.Minute)); a.Acquired {
		c.t.Fatalf("a barging request past the queue: %+v", a)
	}
	c.mustAcquire(w1)
	if err := c.release(w1.Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.be.Leave(c.ctx, w2); err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(w3) // w2 left: w3's turn
	if err := c.release(w3.Item())[0]; err != nil {
		c.t.Fatal(err)
	}

	// A waiter that stops asking is forgotten after its patience.
	c.mustAcquire(lease("g", "h", time.Minute))
	if a := c.acquire(backend.Request{Name: "g", Token: "dead", TTL: time.Minute, Queue: 100 * time.Millisecond}); a.Acquired {
		c.t.Fatalf("queued behind a holder: %+v", a)
	}
	if err := c.release(backend.Item{Name: "g", Token: "h"})[0]; err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(lease("g", "early", time.Minute)); a.Acquired {
		c.t.Fatalf("a barging request while the name is promised to the queue's head: %+v", a)
	}
	time.Sleep(200 * time.Millisecond)
	c.mustAcquire(lease("g", "barging", time.Minute))
}
