package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// permit.lua and the 'z' kind of renew.lua, release.lua and abandon.lua,
// against a real server.
func TestPermitScripts(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	req := func(tok string, n int) backend.Request {
		return backend.Request{Name: "s", Token: tok, TTL: time.Minute, Limit: n}
	}

	a, err := be.Acquire(ctx, req("t1", 2))
	if err != nil || !a.Acquired {
		t.Fatalf("%+v %v", a, err)
	}
	// A resent request gets its first answer, and takes no second permit.
	again, err := be.Acquire(ctx, req("t1", 2))
	if err != nil || !again.Acquired || again.Fence != a.Fence {
		t.Fatalf("resend: %+v %v, first fence %d", again, err, a.Fence)
	}
	if n := raw.ZCard(ctx, "p:{s}").Val(); n != 1 {
		t.Fatalf("%d permits after a resend", n)
	}
	b, err := be.Acquire(ctx, req("t2", 2))
	if err != nil || !b.Acquired || b.Fence <= a.Fence {
		t.Fatalf("second permit: %+v %v", b, err)
	}
	full, err := be.Acquire(ctx, req("t3", 2))
	if err != nil || full.Acquired || full.HolderTTL <= 59*time.Second {
		t.Fatalf("a third of two: %+v %v", full, err)
	}
	for _, k := range []string{"p:{s}", "p:{s}:permits", "p:{s}:fence"} {
		if ttl := raw.PTTL(ctx, k).Val(); ttl <= 59*time.Second || ttl > time.Minute {
			t.Fatalf("%s: TTL %v, want the permits'", k, ttl)
		}
	}

	// Renewal never shortens (S8), and answers "gone" for a permit past
	// its expiry or deleted.
	errs := make([]error, 2)
	be.Renew(ctx, []backend.Item{{Name: "s", Token: "t1", TTL: time.Second, Permit: true}, {Name: "s", Token: "zz", TTL: time.Minute, Permit: true}}, errs)
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrGone) {
		t.Fatalf("renew: %v", errs)
	}
	if score := raw.ZScore(ctx, "p:{s}", "t1").Val(); time.UnixMilli(int64(score)).Before(time.Now().Add(50 * time.Second)) {
		t.Fatal("a renewal with a shorter TTL cut the permit short")
	}
	raw.ZAdd(ctx, "p:{s}", redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "t2"}) // t2 has expired
	be.Renew(ctx, []backend.Item{{Name: "s", Token: "t2", TTL: time.Minute, Permit: true}}, errs[:1])
	if !errors.Is(errs[0], backend.ErrGone) {
		t.Fatalf("renewing an expired permit: %v", errs[0])
	}
	if raw.ZScore(ctx, "p:{s}", "t2").Err() == nil {
		t.Fatal("the expired permit was left in the set")
	}

	// Release frees a permit and tells the waiters; a copy is answered as
	// the first was.
	sub := raw.Subscribe(ctx, "p:{s}:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rel := backend.Item{Name: "s", Token: "t1", TTL: time.Minute, Permit: true}
	for range 2 {
		if err := backend.ReleaseOne(ctx, be, rel); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	if _, err := sub.ReceiveMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "p:{s}", "p:{s}:permits").Val() != 0 {
		t.Fatal("the last release left the set or the fences' hash")
	}
	if err := backend.ReleaseOne(ctx, be, backend.Item{Name: "s", Token: "t9", TTL: time.Minute, Permit: true}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("releasing a permit never held: %v", err)
	}

	// Abandon takes back a permit whose answer was lost, and a copy of the
	// request arriving afterwards is refused.
	if _, err := be.Acquire(ctx, req("t4", 2)); err != nil {
		t.Fatal(err)
	}
	if err := be.Abandon(ctx, req("t4", 2)); err != nil {
		t.Fatal(err)
	}
	late, err := be.Acquire(ctx, req("t4", 2))
	if err != nil || late.Acquired || !late.Retired {
		t.Fatalf("a copy after Abandon: %+v %v", late, err)
	}
	if raw.Exists(ctx, "p:{s}").Val() != 0 {
		t.Fatal("Abandon left the permit")
	}

	// Another kind of holder: a lease excludes permits, and renewing a
	// permit of a name a lease took over answers "not held", not "gone".
	if _, err := be.Acquire(ctx, backend.Request{Name: "s", Token: "lease", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if res, err := be.Acquire(ctx, req("t5", 5)); err != nil || res.Acquired {
		t.Fatalf("a permit beside a lease: %+v %v", res, err)
	}
	be.Renew(ctx, []backend.Item{{Name: "s", Token: "t1", TTL: time.Minute, Permit: true}}, errs[:1])
	if !errors.Is(errs[0], backend.ErrNotHeld) || errors.Is(errs[0], backend.ErrGone) {
		t.Fatalf("renewing a permit of a leased name: %v", errs[0])
	}
}

// permit.lua's stored N: the first grant's N stands while permits are
// held; another N is refused, touching nothing, unless it resizes; the N
// goes with the last permit (letgo.lua's settle()).
func TestPermitLimitStored(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	req := func(tok string, n int, resize bool) backend.Request {
		return backend.Request{Name: "s", Token: tok, TTL: time.Minute, Limit: n, Resize: resize}
	}
	stored := func() string { return raw.HGet(ctx, "p:{s}:permits", "n").Val() }

	if a, err := be.Acquire(ctx, req("t1", 2, false)); err != nil || !a.Acquired {
		t.Fatalf("%+v %v", a, err)
	}
	if s := stored(); s != "2" {
		t.Fatalf("stored n %q after the first grant, want 2", s)
	}
	// A resend of a granted request is answered as the first was.
	if a, err := be.Acquire(ctx, req("t1", 2, false)); err != nil || !a.Acquired {
		t.Fatalf("resend: %+v %v", a, err)
	}
	for _, fair := range []time.Duration{0, time.Minute} {
		r := req("t2", 3, false)
		r.Queue = fair
		a, err := be.Acquire(ctx, r)
		if err != nil || a.Acquired || a.HeldLimit != 2 || a.Arrival != 0 {
			t.Fatalf("n=3 beside n=2 (queue %v): %+v %v", fair, a, err)
		}
	}
	if n := raw.Exists(ctx, "p:{s}:queue", "p:{s}:queue:expiry").Val(); n != 0 {
		t.Fatal("a refused fair request joined the queue")
	}
	// Resizing down to 1 with one held: refused for want of a permit, but
	// stored; then n=2 is the mismatch.
	if a, err := be.Acquire(ctx, req("t3", 1, true)); err != nil || a.Acquired || a.HeldLimit != 0 {
		t.Fatalf("resize to 1 with 1 held: %+v %v", a, err)
	}
	if s := stored(); s != "1" {
		t.Fatalf("stored n %q after resizing to 1", s)
	}
	if a, err := be.Acquire(ctx, req("t4", 2, false)); err != nil || a.HeldLimit != 1 {
		t.Fatalf("n=2 after resizing to 1: %+v %v", a, err)
	}
	if ttl := raw.PTTL(ctx, "p:{s}:permits").Val(); ttl <= 0 {
		t.Fatalf("the permits' hash has TTL %v after a resize", ttl)
	}
	// The last release takes the stored n with it.
	errs := make([]error, 1)
	be.Release(ctx, []backend.Item{{Name: "s", Token: "t1", TTL: time.Minute, Permit: true}}, errs)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if n := raw.Exists(ctx, "p:{s}", "p:{s}:permits").Val(); n != 0 {
		t.Fatalf("%d keys left after the last permit's release", n)
	}
	if a, err := be.Acquire(ctx, req("t5", 5, false)); err != nil || !a.Acquired {
		t.Fatalf("n=5 on a fresh set: %+v %v", a, err)
	}
	if s := stored(); s != "5" {
		t.Fatalf("stored n %q on a fresh set, want 5", s)
	}
}
