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
	req := backend.Request{Name: "r", Token: "req1", TTL: time.Minute, Owner: "alice", Exclusive: true}

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
	// An exclusive owner's count is the abandoned request's: deleted.
	excl := backend.Request{Name: "a", Token: "t1", TTL: time.Minute, Owner: "fresh", Exclusive: true}
	if _, err := be.Acquire(ctx, excl); err != nil {
		t.Fatal(err)
	}
	if err := be.Abandon(ctx, excl); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "p:{a}").Val() != 0 {
		t.Fatal("abandon left an exclusive owner's lock")
	}
	// A shared owner's count cannot be told apart: left alone, but a late
	// copy of the request is refused, re-entry included.
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
