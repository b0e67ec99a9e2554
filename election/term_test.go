package election_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// waitRun waits for Run's result, generously: a Run that does not return
// is the failure.
func waitRun(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return within 20s %s", what)
		return nil
	}
}

// Issue 47, item 4: "stop campaigning after losing" — Resign from
// OnStoppedLeading, with a context that never ends — returns, and so does
// Run, with nil.
func TestResignFromOnStoppedLeading(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := newCandidate(t, srv.Client(t), "stopper", "a", time.Second)
	started, resigned := make(chan struct{}), make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.e.Run(context.Background(), election.Callbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				<-lctx.Done()
			},
			OnStoppedLeading: func() { resigned <- c.e.Resign(context.Background()) },
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead")
	}
	raw.Del(context.Background(), "tenure:{stopper}") // the term ends: the lease is lost
	if err := waitRun(t, done, "after Resign from OnStoppedLeading"); err != nil {
		t.Errorf("Run: %v, want nil after Resign", err)
	}
	if err := <-resigned; err != nil {
		t.Errorf("Resign from OnStoppedLeading: %v", err)
	}
}

// Issue 47, item 5: a Resign that comes while the campaign's Acquire has
// taken the lease but no term has begun yet (held there by an AcquireDone
// hook, 300ms) returns only once the lease is released: the next
// candidate's TryAcquire then succeeds.
func TestResignWhileTheLeaseIsTaken(t *testing.T) {
	srv := redistest.Start(t)
	acquired := make(chan struct{}, 1)
	hooks := lease.Hooks{AcquireDone: func(_ context.Context, info lease.AcquireInfo) {
		if info.Err == nil {
			acquired <- struct{}{}
			time.Sleep(300 * time.Millisecond)
		}
	}}
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet), lease.WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e, err := election.New(election.Config{Manager: m, Name: "window", Identity: "a", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- e.Run(context.Background(), election.Callbacks{OnStartedLeading: func(lctx context.Context) { <-lctx.Done() }})
	}()
	<-acquired
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	next := newCandidate(t, srv.Client(t), "window", "b", 5*time.Second)
	l, err := next.m.TryAcquire(ctx, "window")
	if err != nil {
		t.Errorf("the next candidate's TryAcquire after Resign returned: %v", err)
	} else {
		_ = l.Release(ctx)
	}
	if err := waitRun(t, done, "after Resign"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// Suspicion (a) of issue 47: a renewal that Redis applied but that was
// answered after the lease's local deadline leaves the key, still holding
// the lost lease's token, for up to a TTL (here the test applies it: the
// leader is cut off, and the renewal gets through once the lease is lost).
// The lost term's release, once OnStartedLeading has wound down, still
// goes out: on a client that heeds contexts, one capped at the passed
// deadline never would, and the key would keep every candidate out while
// observers reported a leader whose IsLeader is false.
func TestLateRenewalLossIsReleased(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	opts := srv.Options()
	opts.Addr, opts.MaxRetries, opts.ContextTimeoutEnabled = proxy.Addr(), -1, true
	opts.ReadTimeout, opts.WriteTimeout = time.Minute, time.Minute
	cut := redis.NewClient(opts)
	t.Cleanup(func() { cut.Close() })
	m, err := lease.New(cut, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	const ttl = 3 * time.Second
	e, err := election.New(election.Config{Manager: m, Client: raw, Name: "late", Identity: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	started, lost := make(chan struct{}), make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(context.Background(), election.Callbacks{OnStartedLeading: func(lctx context.Context) {
			close(started)
			<-lctx.Done()
			proxy.BlackHole(false)
			raw.PExpire(context.Background(), "tenure:{late}", ttl) // the late renewal
			time.Sleep(200 * time.Millisecond)                      // winding down
			lost <- context.Cause(lctx)
		}})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead")
	}
	proxy.BlackHole(true)
	var cause error
	select {
	case cause = <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("the term did not end")
	}
	if !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Resign(ctx); err != nil { // returns once the lost lease's release is done
		t.Fatalf("Resign: %v", err)
	}
	if err := waitRun(t, done, "after Resign"); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := raw.Exists(ctx, "tenure:{late}", "tenure:{late}:leader").Val(); n != 0 {
		t.Errorf("%d of the lease and its record are still there (the lease's TTL %v) after the lost term's release", n, raw.PTTL(ctx, "tenure:{late}").Val())
	}
	if rec, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader after the term was lost and released: %+v, %v; IsLeader %v", rec, err, e.IsLeader())
	}
}

// Suspicion (b) of issue 47: while "tenure release --force" (its own
// script, read from cmd/tenure) has revoked the leader's lease, the
// revocation marker in the lease key is no leader: ReadLeader, Leader and
// Observe report none, though the record is still there.
func TestRevokedLeaseIsNoLeader(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	src, err := os.ReadFile("../cmd/tenure/scripts/release_force.lua")
	if err != nil {
		t.Fatal(err)
	}
	force := redis.NewScript(backend.PublishLua(false) + string(src))
	c := newCandidate(t, srv.Client(t), "revoked", "a", 10*time.Second)
	c.run(t)
	leaderOf(t, 10*time.Second, c)
	ctx := context.Background()
	if rec, _, err := election.ReadLeader(ctx, raw, "", "revoked"); err != nil || rec.Identity != "a" {
		t.Fatalf("ReadLeader while a leads: %+v, %v", rec, err)
	}
	l := keys.Layout{Prefix: lease.DefaultKeyPrefix}
	k := []string{l.Lease("revoked"), l.Fence("revoked"), l.Permits("revoked")}
	if err := force.Run(ctx, raw, k, l.Channel("revoked"), "revoke", keys.RevokedPrefix).Err(); err != nil {
		t.Fatal(err)
	}
	if v := raw.Get(ctx, l.Lease("revoked")).Val(); len(v) < len(keys.RevokedPrefix) || v[:len(keys.RevokedPrefix)] != keys.RevokedPrefix {
		t.Fatalf("no revocation marker: %q", v)
	}
	rec, ttl, err := election.ReadLeader(ctx, raw, "", "revoked")
	if err != nil || rec != (election.Record{}) {
		t.Errorf("ReadLeader during a revocation: %+v, %v; want no leader", rec, err)
	}
	if ttl <= 0 {
		t.Errorf("ReadLeader's TTL during a revocation: %v, want the marker's", ttl)
	}
}

// Suspicion (d) of issue 47: a term whose OnStartedLeading returned at
// once, but whose release waits on a Redis that does not answer, is not
// stuck: Check stays nil while the release goes on, however small the
// tolerance.
func TestCheckDuringAnUnansweredRelease(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	opts := srv.Options()
	opts.Addr, opts.MaxRetries = proxy.Addr(), -1
	cut := redis.NewClient(opts)
	t.Cleanup(func() { cut.Close() })
	m, err := lease.New(cut, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e, err := election.New(election.Config{Manager: m, Name: "slow-release", Identity: "a", TTL: 10 * time.Second, ReleaseTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	started, returned := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(context.Background(), election.Callbacks{OnStartedLeading: func(lctx context.Context) {
			close(started)
			<-lctx.Done()
			close(returned)
		}})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead")
	}
	proxy.BlackHole(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = e.Resign(ctx) // gives up waiting: the release does not get through
	<-returned
	var stuck atomic.Value
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if err := e.Check(time.Millisecond); err != nil && stuck.Load() == nil {
				stuck.Store(err)
			}
		}
	}
	proxy.BlackHole(false)
	if err, _ := stuck.Load().(error); err != nil {
		t.Errorf("Check while the term's release waited, its callback returned: %v", err)
	}
}
