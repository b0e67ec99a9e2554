package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/redistest"
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
	if raw.TTL(ctx, "p:{n}:fence").Val() != -1 {
		t.Fatal("fence counter has a TTL")
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
	if err != nil || !d.Acquired || d.Fence != a.Fence+1 {
		t.Fatalf("next: %+v %v", d, err)
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
