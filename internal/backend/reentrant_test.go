package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestReentrantScripts(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	req := backend.Request{Name: "r", Token: "req1", TTL: time.Minute, Owner: "alice"}

	first, err := be.Acquire(ctx, req)
	if err != nil || !first.Acquired || first.Count != 1 {
		t.Fatalf("%+v %v", first, err)
	}
	if raw.HGet(ctx, "p:{r}", "alice").Val() != "1" || raw.PTTL(ctx, "p:{r}").Val() < 59*time.Second {
		t.Fatal("hash not set with its TTL")
	}
	// The owner enters again through acquire (another process of the job)
	// and through reenter; the fence does not change.
	req2 := req
	req2.Token = "req2"
	again, err := be.Acquire(ctx, req2)
	if err != nil || !again.Acquired || again.Count != 2 || again.Fence != first.Fence {
		t.Fatalf("%+v %v", again, err)
	}
	item := req.Item()
	if n, err := be.Reenter(ctx, item); err != nil || n != 3 {
		t.Fatalf("reenter: %d %v", n, err)
	}
	// Another owner, and a lease, are refused; nobody meets WRONGTYPE.
	if res, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "x", TTL: time.Minute, Owner: "bob"}); err != nil || res.Acquired {
		t.Fatalf("bob: %+v %v", res, err)
	}
	if res, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "x", TTL: time.Minute}); err != nil || res.Acquired || res.HolderTTL <= 0 {
		t.Fatalf("a lease: %+v %v", res, err)
	}
	errs := make([]error, 2)
	be.Renew(ctx, []backend.Item{item, {Name: "r", Token: "alice", TTL: time.Minute}}, errs)
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrNotHeld) {
		t.Fatalf("renew as owner and as a lease token: %v", errs)
	}
	be.Release(ctx, []backend.Item{{Name: "r", Token: "alice", TTL: time.Minute}}, errs[:1])
	if !errors.Is(errs[0], backend.ErrNotHeld) || raw.HGet(ctx, "p:{r}", "alice").Val() != "3" {
		t.Fatalf("a lease release touched a reentrant lock: %v", errs[0])
	}
	// Release takes back Count entries; 0 takes back all.
	one := item
	one.Count = 1
	be.Release(ctx, []backend.Item{one}, errs[:1])
	if errs[0] != nil || raw.HGet(ctx, "p:{r}", "alice").Val() != "2" {
		t.Fatalf("release of one entry: %v, count %s", errs[0], raw.HGet(ctx, "p:{r}", "alice").Val())
	}
	sub := raw.Subscribe(ctx, "p:{r}:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	be.Release(ctx, []backend.Item{item}, errs[:1])
	if errs[0] != nil || raw.Exists(ctx, "p:{r}").Val() != 0 {
		t.Fatalf("release of all: %v", errs[0])
	}
	if msg, err := sub.ReceiveTimeout(ctx, time.Second); err != nil {
		t.Fatalf("no release message: %v", err)
	} else if _, ok := msg.(interface{ String() string }); !ok {
		t.Fatalf("unexpected %T", msg)
	}
	if _, err := be.Reenter(ctx, item); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("reenter of a free name: %v", err)
	}
	if raw.Exists(ctx, "p:{r}").Val() != 0 {
		t.Fatal("reenter took a free name")
	}
	// A new acquisition gets a new fence.
	third, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "req3", TTL: time.Minute, Owner: "bob"})
	if err != nil || !third.Acquired || third.Fence <= first.Fence {
		t.Fatalf("%+v %v", third, err)
	}
}

func TestReentrantAbandon(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	// A request that took the free name: its one entry is taken back.
	excl := backend.Request{Name: "a", Token: "t1", TTL: time.Minute, Owner: "fresh"}
	if _, err := be.Acquire(ctx, excl); err != nil {
		t.Fatal(err)
	}
	if err := be.Abandon(ctx, excl); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "p:{a}").Val() != 0 {
		t.Fatal("abandon left the entry of the request that took the name")
	}
	// One that was never applied changes nothing, and a late copy of it is
	// refused, re-entry included.
	shared := backend.Request{Name: "b", Token: "t2", TTL: time.Minute, Owner: "job"}
	if _, err := be.Acquire(ctx, shared); err != nil {
		t.Fatal(err)
	}
	late := shared
	late.Token = "t3"
	if err := be.Abandon(ctx, late); err != nil {
		t.Fatal(err)
	}
	if res, err := be.Acquire(ctx, late); err != nil || res.Acquired {
		t.Fatalf("late copy: %+v %v", res, err)
	}
	if raw.HGet(ctx, "p:{b}", "job").Val() != "1" {
		t.Fatal("abandon or its late copy changed a shared owner's count")
	}
}

// TestReentrantEntriesOnce: every entry is applied once, whatever is
// resent or taken back (issue 47, item 2). A copy of an acquire that
// entered again, resent as go-redis resends after a lost reply, gets the
// first answer; abandon.lua takes back exactly the one entry an applied
// acquire or re-entry of a shared owner made; a re-entry taken back before
// it arrives is refused.
func TestReentrantEntriesOnce(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	count := func() string { return raw.HGet(ctx, "p:{s}", "job").Val() }
	first := backend.Request{Name: "s", Token: "t1", TTL: time.Minute, Owner: "job"}
	second := first
	second.Token = "t2"
	a1, err := be.Acquire(ctx, first)
	if err != nil || a1.Count != 1 {
		t.Fatalf("first: %+v %v", a1, err)
	}
	for i := 0; i < 2; i++ { // the request, then its resent copy
		if a, err := be.Acquire(ctx, second); err != nil || a.Count != 2 || a.Fence != a1.Fence {
			t.Fatalf("entering again, send %d: %+v %v", i+1, a, err)
		}
	}
	if a, err := be.Acquire(ctx, first); err != nil || a.Count != 1 || count() != "2" {
		t.Fatalf("a resent copy of the first acquire: %+v %v, count %s, want 2", a, err, count())
	}
	// Taking back the second acquire, twice, takes one entry.
	for i := 0; i < 2; i++ {
		if err := be.Abandon(ctx, second); err != nil || count() != "1" {
			t.Fatalf("abandon %d: %v, count %s, want 1", i+1, err, count())
		}
	}
	if a, err := be.Acquire(ctx, second); err != nil || a.Acquired || !a.Retired || count() != "1" {
		t.Fatalf("a copy after the abandon: %+v %v, count %s", a, err, count())
	}
	// A re-entry applied and taken back; one taken back before it comes.
	in := backend.Item{Name: "s", Token: "job", TTL: time.Minute, Reentrant: true, Op: "op1"}
	if n, err := be.Reenter(ctx, in); err != nil || n != 2 {
		t.Fatalf("reenter: %d %v", n, err)
	}
	if n, err := be.Reenter(ctx, in); err != nil || n != 2 || count() != "2" {
		t.Fatalf("a resent reenter: %d %v, count %s", n, err, count())
	}
	if err := be.Abandon(ctx, backend.Request{Name: "s", Token: "op1", TTL: time.Minute, Owner: "job"}); err != nil || count() != "1" {
		t.Fatalf("taking back an applied re-entry: %v, count %s, want 1", err, count())
	}
	early := in
	early.Op = "op2"
	if err := be.Abandon(ctx, backend.Request{Name: "s", Token: "op2", TTL: time.Minute, Owner: "job"}); err != nil || count() != "1" {
		t.Fatalf("taking back a re-entry not yet come: %v, count %s", err, count())
	}
	if _, err := be.Reenter(ctx, early); !errors.Is(err, backend.ErrNotHeld) || count() != "1" {
		t.Fatalf("a re-entry after its take-back: %v, count %s, want ErrNotHeld and 1", err, count())
	}
	// The first acquire's own release (its op is the acquire's token)
	// takes its entry, and a late copy of that acquire is refused then.
	errs := make([]error, 1)
	be.Release(ctx, []backend.Item{{Name: "s", Token: "job", TTL: time.Minute, Reentrant: true, Count: 1, Op: "t1"}}, errs)
	if errs[0] != nil || raw.Exists(ctx, "p:{s}").Val() != 0 {
		t.Fatalf("release: %v, count %s", errs[0], count())
	}
	if a, err := be.Acquire(ctx, first); err != nil || a.Acquired {
		t.Fatalf("a copy of the first acquire after its release: %+v %v", a, err)
	}
}

// TestReentrantTakeBackAfterLoss: abandon.lua takes an entry back only from
// the hold the request entered. Once that hold is gone and the owner holds
// the name anew (another fence), the request's entry went with the old
// hold: nothing is taken.
func TestReentrantTakeBackAfterLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	req := backend.Request{Name: "l", Token: "t1", TTL: time.Minute, Owner: "job"}
	if _, err := be.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "p:{l}") // lost with the server's data, say
	anew := req
	anew.Token = "t2"
	if a, err := be.Acquire(ctx, anew); err != nil || !a.Acquired || a.Count != 1 {
		t.Fatalf("anew: %+v %v", a, err)
	}
	if err := be.Abandon(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := raw.HGet(ctx, "p:{l}", "job").Val(); got != "1" {
		t.Fatalf("abandon of the old hold's request took from the new hold: count %q, want 1", got)
	}
}

func TestFairQueueScript(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	be := backend.NewRedis(srv.Client(t), "p:")
	ctx := context.Background()
	holder := backend.Request{Name: "f", Token: "h", TTL: time.Minute}
	if _, err := be.Acquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	w1 := backend.Request{Name: "f", Token: "w1", TTL: time.Minute, Queue: 5 * time.Second}
	w2 := backend.Request{Name: "f", Token: "w2", TTL: time.Minute, Queue: 5 * time.Second}
	for _, w := range []backend.Request{w1, w2, w1} {
		if res, err := be.Acquire(ctx, w); err != nil || res.Acquired {
			t.Fatalf("%s: %+v %v", w.Token, res, err)
		}
	}
	if got := raw.ZRange(ctx, "p:{f}:queue", 0, -1).Val(); len(got) != 2 || got[0] != "w1" {
		t.Fatalf("queue %v", got)
	}
	errs := make([]error, 1)
	be.Release(ctx, []backend.Item{holder.Item()}, errs)
	// Free, but promised to w1: w2 and a barging acquire wait, for at most
	// w1's remaining time in the queue.
	res, err := be.Acquire(ctx, w2)
	if err != nil || res.Acquired || res.HolderTTL <= 0 || res.HolderTTL > 5*time.Second {
		t.Fatalf("w2 before its turn: %+v %v", res, err)
	}
	if res, err := be.Acquire(ctx, backend.Request{Name: "f", Token: "b", TTL: time.Minute}); err != nil || res.Acquired {
		t.Fatalf("barging past the queue: %+v %v", res, err)
	}
	// w1 leaves; w2's turn.
	if err := be.Leave(ctx, w1); err != nil {
		t.Fatal(err)
	}
	if res, err := be.Acquire(ctx, w2); err != nil || !res.Acquired {
		t.Fatalf("w2 at the head: %+v %v", res, err)
	}
	if raw.Exists(ctx, "p:{f}:queue", "p:{f}:queue:expiry").Val() != 0 {
		t.Fatal("empty queue keys left")
	}
}
