package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// The scripts, one by one, against a real server.

func TestAcquireScript(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()

	a, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok1", TTL: time.Minute})
	if err != nil || !a.Acquired {
		t.Fatalf("%+v %v", a, err)
	}
	if now := time.Now().UnixMicro(); a.Fence < now-60e6 || a.Fence > now+60e6 {
		t.Fatalf("first fence %d not seeded from the server clock (%d)", a.Fence, now)
	}
	if raw.Get(ctx, "p:{n}").Val() != "tok1" {
		t.Fatal("token not stored at P{N}")
	}
	if ttl := raw.PTTL(ctx, "p:{n}").Val(); ttl <= 59*time.Second {
		t.Fatalf("TTL %v", ttl)
	}
	// The counter outlives the lock key by one TTL at most (S6): twice
	// the TTL, so that light renewals may leave it be (renew_leases.lua).
	if ttl := raw.PTTL(ctx, "p:{n}:fence").Val(); ttl <= 119*time.Second || ttl > 2*time.Minute {
		t.Fatalf("fence counter TTL %v, want twice the lease's", ttl)
	}

	// Resending the same request (a client retry) answers the same.
	again, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok1", TTL: time.Minute})
	if err != nil || !again.Acquired || again.Fence != a.Fence {
		t.Fatalf("resend: %+v %v, first fence %d", again, err, a.Fence)
	}

	b, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok2", TTL: time.Minute})
	if err != nil || b.Acquired || b.HolderTTL <= 59*time.Second {
		t.Fatalf("held: %+v %v", b, err)
	}

	raw.Set(ctx, "p:{forever}", "x", 0)
	c, err := be.Acquire(ctx, backend.Request{Name: "forever", Token: "tok", TTL: time.Minute})
	if err != nil || c.Acquired || c.HolderTTL >= 0 {
		t.Fatalf("key without expiry: %+v %v", c, err)
	}

	errs := []error{nil}
	be.Release(ctx, []backend.Item{{Name: "n", Token: "tok1"}}, errs)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	d, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok3", TTL: time.Minute})
	if err != nil || !d.Acquired || d.Fence <= a.Fence {
		t.Fatalf("next: %+v %v", d, err)
	}
}

// S5: a fence is max(counter + 1, server time in us), so neither a counter
// that went back (an older snapshot, a lagged replica) nor one that is ahead
// of the clock makes a fence repeat.
func TestAcquireFenceIsMaxOfCounterAndClock(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	release := func(name, tok string) {
		t.Helper()
		errs := []error{nil}
		be.Release(ctx, []backend.Item{{Name: name, Token: tok}}, errs)
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
	}

	a, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "t1", TTL: time.Minute})
	if err != nil || !a.Acquired {
		t.Fatalf("%+v %v", a, err)
	}
	release("n", "t1")
	// The counter went back, as after a restart from an older snapshot.
	raw.Set(ctx, "p:{n}:fence", a.Fence-1000, time.Minute)
	b, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "t2", TTL: time.Minute})
	if err != nil || !b.Acquired || b.Fence <= a.Fence {
		t.Fatalf("after the counter went back to %d: %+v %v, want a fence above %d", a.Fence-1000, b, err, a.Fence)
	}
	if got, _ := raw.Get(ctx, "p:{n}:fence").Int64(); got != b.Fence {
		t.Fatalf("counter %d, want the fence handed out, %d, written back", got, b.Fence)
	}
	release("n", "t2")

	// A counter ahead of the clock (a host whose clock stepped back a
	// little) still gives counter + 1.
	ahead := b.Fence + 3_600_000_000
	raw.Set(ctx, "p:{n}:fence", ahead, time.Minute)
	c, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "t3", TTL: time.Minute})
	if err != nil || !c.Acquired || c.Fence != ahead+1 {
		t.Fatalf("counter ahead of the clock: %+v %v, want %d", c, err, ahead+1)
	}
	release("n", "t3")

	// A reentrant lock's first entry takes a fence by the same rule.
	raw.Set(ctx, "p:{r}:fence", 5, 0)
	r, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "op", Owner: "o", TTL: time.Minute})
	if err != nil || !r.Acquired || r.Fence <= a.Fence {
		t.Fatalf("reentrant after a counter of 5: %+v %v, want a fence above %d", r, err, a.Fence)
	}
	if ttl := raw.PTTL(ctx, "p:{r}:fence").Val(); ttl <= 0 {
		t.Fatalf("counter TTL %v after a reentrant acquisition", ttl)
	}
}

// The counter's TTL follows the lock key's, one TTL longer: renewals and
// re-entries that lengthen the key lengthen the counter, so a held name
// always has it.
func TestFenceCounterLivesWithTheLock(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	if _, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	errs := []error{nil}
	be.Renew(ctx, []backend.Item{{Name: "n", Token: "tok", TTL: time.Minute}}, errs)
	if ttl := raw.PTTL(ctx, "p:{n}:fence").Val(); errs[0] != nil || ttl <= 59*time.Second {
		t.Fatalf("counter TTL %v after a renewal to 1m (%v)", ttl, errs[0])
	}
	// A counter left without a TTL (by an older version) gets one.
	raw.Persist(ctx, "p:{n}:fence")
	be.Renew(ctx, []backend.Item{{Name: "n", Token: "tok", TTL: time.Second}}, errs)
	if ttl := raw.PTTL(ctx, "p:{n}:fence").Val(); errs[0] != nil || ttl <= 60*time.Second || ttl > 61*time.Second {
		t.Fatalf("counter TTL %v after a renewal that must not shorten the 1m lease (%v), want the lease's and a TTL", ttl, errs[0])
	}

	if _, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "op", Owner: "o", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Reenter(ctx, backend.Item{Name: "r", Token: "o", TTL: time.Minute, Reentrant: true}); err != nil {
		t.Fatal(err)
	}
	if ttl := raw.PTTL(ctx, "p:{r}:fence").Val(); ttl <= 59*time.Second {
		t.Fatalf("counter TTL %v after a re-entry with 1m", ttl)
	}
	a, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "op2", Owner: "o", TTL: 2 * time.Minute})
	if err != nil || !a.Acquired || a.Count != 3 {
		t.Fatalf("%+v %v", a, err)
	}
	if ttl := raw.PTTL(ctx, "p:{r}:fence").Val(); ttl <= 119*time.Second {
		t.Fatalf("counter TTL %v after an acquire's re-entry with 2m", ttl)
	}
}

func TestRenewScriptNeverShortensAndComparesToken(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	if _, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 3)
	be.Renew(ctx, []backend.Item{
		{Name: "n", Token: "tok", TTL: time.Minute},
		{Name: "n", Token: "other", TTL: time.Hour},
		{Name: "missing", Token: "tok", TTL: time.Minute},
	}, errs)
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrNotHeld) || !errors.Is(errs[2], backend.ErrNotHeld) {
		t.Fatalf("%v", errs)
	}
	if ttl := raw.PTTL(ctx, "p:{n}").Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("TTL %v after renewal to 1m (the other token's 1h must not apply)", ttl)
	}
	be.Renew(ctx, []backend.Item{{Name: "n", Token: "tok", TTL: time.Second}}, errs[:1])
	if ttl := raw.PTTL(ctx, "p:{n}").Val(); errs[0] != nil || ttl <= 59*time.Second {
		t.Fatalf("renewal with 1s shortened the TTL to %v (%v)", ttl, errs[0])
	}
	raw.Del(ctx, "p:{n}")
	raw.HSet(ctx, "p:{n}", "owner", 1)
	be.Renew(ctx, []backend.Item{{Name: "n", Token: "tok", TTL: time.Minute}}, errs[:1])
	if !errors.Is(errs[0], backend.ErrNotHeld) {
		t.Fatalf("renew over a hash: %v", errs[0])
	}
}

func TestReleaseScriptComparesAndPublishes(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	sub := raw.Subscribe(ctx, "p:{n}:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 1)
	be.Release(ctx, []backend.Item{{Name: "n", Token: "other"}}, errs)
	if !errors.Is(errs[0], backend.ErrNotHeld) || raw.Exists(ctx, "p:{n}").Val() != 1 {
		t.Fatalf("release with another token: %v", errs[0])
	}
	be.Release(ctx, []backend.Item{{Name: "n", Token: "tok"}}, errs)
	if errs[0] != nil || raw.Exists(ctx, "p:{n}").Val() != 0 {
		t.Fatalf("release: %v", errs[0])
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := sub.ReceiveMessage(rctx); err != nil {
		t.Fatalf("no release message: %v", err)
	}
}

func TestAbandonScriptBothOrders(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()

	// Applied, then abandoned: the lease is deleted.
	if _, err := be.Acquire(ctx, backend.Request{Name: "a", Token: "tok", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := be.Abandon(ctx, backend.Request{Name: "a", Token: "tok", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "p:{a}").Val() != 0 {
		t.Fatal("abandon left the applied lease")
	}

	// Abandoned first, then the late request arrives: it is refused.
	if err := be.Abandon(ctx, backend.Request{Name: "b", Token: "late", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	res, err := be.Acquire(ctx, backend.Request{Name: "b", Token: "late", TTL: time.Minute})
	if err != nil || res.Acquired {
		t.Fatalf("late acquire of an abandoned token: %+v %v", res, err)
	}
	if raw.Exists(ctx, "p:{b}").Val() != 0 {
		t.Fatal("late acquire left a phantom lease")
	}
	if res, err := be.Acquire(ctx, backend.Request{Name: "b", Token: "fresh", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("another token is not blocked: %+v %v", res, err)
	}

	// Abandoning never touches another holder.
	if err := be.Abandon(ctx, backend.Request{Name: "b", Token: "late", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if raw.Get(ctx, "p:{b}").Val() != "fresh" {
		t.Fatal("abandon touched another holder's lease")
	}
}

func TestScriptsReportServerErrors(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	raw.HSet(ctx, "p:{n}:fence", "x", 1) // a fence key of the wrong type
	_, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Minute})
	if err == nil {
		t.Fatal("acquire over a corrupt fence key succeeded")
	}
	if backend.MaybeApplied(err) {
		t.Fatalf("a server error reply counted as maybe applied: %v", err)
	}
	if raw.Exists(ctx, "p:{n}").Val() != 0 {
		t.Fatal("a failed acquire left a lease")
	}
}
