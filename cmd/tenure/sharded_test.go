package main

// release --force on a Cluster: the sharded release message wakes waiters
// and reaches holders.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestClusterReleaseForceWakes: on a Cluster, release --force tells the
// name's waiters as the library's releases do, by a sharded message, which
// a waiter whose backoff is a minute, behind a holder whose TTL is 30s,
// hears at once.
func TestClusterReleaseForceWakes(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newManager := func(opts ...lease.Option) *lease.Manager {
		m, err := lease.New(cl.Client(t), append([]lease.Option{lease.WithLogger(quietLogger()), lease.WithTTL(30 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	holder := newManager()
	waiter := newManager(lease.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Minute) }))
	const name = "clu-force"
	if _, err := holder.Acquire(ctx, name); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, name)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Once the waiter's manager listens on the name's primary.
	ch := "tenure:{" + name + "}:released"
	owner, err := cl.Client(t).MasterForKey(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for owner.PubSubShardNumSub(ctx, ch).Val()[ch] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter's manager does not listen on the name's primary")
		}
		select {
		case err := <-got:
			t.Fatalf("the waiter ended before the release: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	url := "redis-cluster://" + strings.Join(cl.Addrs(), ",")
	code, out, stderr := result(t, on(nil, "--redis", url, "release", "--force", "--now", name))
	if code != 0 || !strings.Contains(out, "removed the lease") {
		t.Fatalf("release --force: status %d: %s%s", code, out, stderr)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by release --force (its backoff is a minute, the TTL 30s)")
	}
}

// TestClusterHoldNoticesReleaseForce: on a Cluster the release message is
// sharded (SPUBLISH), so a holder must listen with SSUBSCRIBE on the name's
// primary to notice "release --force" at once; a plain SUBSCRIBE hears
// nothing, and the hold would learn of it only at its renewal, 100s away.
func TestClusterHoldNoticesReleaseForce(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	url := "redis-cluster://" + strings.Join(cl.Addrs(), ",")
	const name = "clu-forced-hold"
	h := startHold(t, on(nil, "--redis", url, "-vv", "run", "--ttl", "5m", name))
	if code, out, errOut := result(t, on(nil, "--redis", url, "release", "--force", name)); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("release --force: %d %s %s", code, out, errOut)
	}
	// 60s is well before the first renewal (100s).
	if code := exitOf(t, h.cmd, 60*time.Second); code != exitLost {
		t.Errorf("status %d, want %d; stderr: %s", code, exitLost, h.stderr.String())
	}
	if strings.Contains(h.stderr.String(), "msg=renewed") {
		t.Errorf("a renewal came before the loss: the release message went unheard: %s", h.stderr.String())
	}
}
