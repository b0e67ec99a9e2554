package backend_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// replyErr is an error reply of a server, as go-redis returns them.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A server without sharded pub/sub (Redis 6.2) refuses SSUBSCRIBE as an
// unknown command: the subscriber falls back to SUBSCRIBE on that, and on
// nothing else (a refused permission, a moved slot or a broken connection
// are not the server's version).
func TestUnknownCommand(t *testing.T) {
	srv := redistest.Start(t)
	real := srv.Client(t).Do(context.Background(), "SSUBSCRIBEX", "ch").Err()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{replyErr("ERR unknown command 'ssubscribe', with args beginning with: 'tenure:{n}:released' "), true},
		{replyErr("ERR unknown command `ssubscribe`, with args beginning with: `tenure:{n}:released`, "), true},
		{real, true},
		{replyErr("NOPERM this user has no permissions to run the 'ssubscribe' command"), false},
		{replyErr("MOVED 5258 127.0.0.1:7001"), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := backend.UnknownCommand(c.err); got != c.want {
			t.Errorf("UnknownCommand(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// On a Cluster every script that tells waiters publishes a sharded
// message, heard on the channel's slot owner by SSUBSCRIBE, and no classic
// one, which the Cluster would carry to every node.
func TestClusterScriptsPublishSharded(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	cc := cl.Client(t)
	be := backend.NewRedis(cc, "p:")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(req backend.Request) {
		t.Helper()
		if a, err := be.Acquire(ctx, req); err != nil || !a.Acquired {
			t.Fatalf("acquire %+v: %+v %v", req, a, err)
		}
	}
	release := func(it backend.Item) error {
		errs := []error{nil}
		be.Release(ctx, []backend.Item{it}, errs)
		return errs[0]
	}
	for _, c := range []struct {
		what string
		op   func(name string)
	}{
		{"release of a lease", func(n string) {
			acquire(backend.Request{Name: n, Token: "t", TTL: time.Minute})
			must(release(backend.Item{Name: n, Token: "t"}))
		}},
		{"release of a permit", func(n string) {
			acquire(backend.Request{Name: n, Token: "t", TTL: time.Minute, Limit: 2})
			must(release(backend.Item{Name: n, Token: "t", Permit: true}))
		}},
		{"release of a reentrant lock", func(n string) {
			acquire(backend.Request{Name: n, Token: "t", TTL: time.Minute, Owner: "o"})
			must(release(backend.Item{Name: n, Token: "o", Reentrant: true}))
		}},
		{"abandon", func(n string) {
			acquire(backend.Request{Name: n, Token: "t", TTL: time.Minute})
			must(be.Abandon(ctx, backend.Request{Name: n, Token: "t", TTL: time.Minute}))
		}},
		{"leave", func(n string) {
			w := backend.Request{Name: n, Token: "w", TTL: time.Minute, Queue: time.Minute}
			if a, err := be.Acquire(ctx, w); err != nil || !a.Acquired {
				t.Fatalf("%+v %v", a, err)
			}
			queued := backend.Request{Name: n, Token: "q", TTL: time.Minute, Queue: time.Minute}
			if a, err := be.Acquire(ctx, queued); err != nil || a.Acquired {
				t.Fatalf("queued: %+v %v", a, err)
			}
			// The name free and a waiter queued: its leaving lets the
			// others in.
			errs := []error{nil}
			be.Release(ctx, []backend.Item{w.Item()}, errs)
			must(errs[0])
			must(be.Leave(ctx, queued))
		}},
		{"downgrade", func(n string) {
			w := backend.Request{Name: n, Token: "w", TTL: time.Minute}
			acquire(w)
			_, err := be.Downgrade(ctx, w.Item(), backend.Request{Name: n, Token: "r", TTL: time.Minute, Limit: 3})
			must(err)
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			expectSharded(ctx, t, cc, "p:{"+t.Name()+"}:released", func() { c.op(t.Name()) })
		})
	}
}

// expectSharded runs op, which must publish on channel, and checks that it
// published a sharded message and no classic one.
func expectSharded(ctx context.Context, t *testing.T, cc *redis.ClusterClient, channel string, op func()) {
	t.Helper()
	owner, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		t.Fatal(err)
	}
	sharded := owner.Subscribe(ctx)
	defer sharded.Close()
	classic := owner.Subscribe(ctx)
	defer classic.Close()
	if err := sharded.SSubscribe(ctx, channel); err != nil {
		t.Fatal(err)
	}
	if err := classic.Subscribe(ctx, channel); err != nil {
		t.Fatal(err)
	}
	for _, ps := range []*redis.PubSub{sharded, classic} {
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
	}
	op()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if msg, err := sharded.ReceiveMessage(rctx); err != nil || msg.Payload != "released" {
		t.Fatalf("no sharded release message: %v %v", msg, err)
	}
	// A classic message published now comes after any the script
	// published: the first one heard must be this one.
	if err := owner.Publish(ctx, channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if msg, err := classic.ReceiveMessage(rctx); err != nil || msg.Payload != "marker" {
		t.Fatalf("a classic message besides the sharded one: %v %v", msg, err)
	}
}
