package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/tests/redistest"
)

// term runs e until it leads, and returns the leading context's Record and
// a function that resigns and checks that Run returned nil.
func term(t *testing.T, e *election.Election) (election.Record, func()) {
	t.Helper()
	leading := make(chan election.Record, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(context.Background(), election.Callbacks{OnStartedLeading: func(lctx context.Context) {
			rec, _ := election.Leading(lctx)
			leading <- rec
			<-lctx.Done()
		}})
	}()
	var rec election.Record
	select {
	case rec = <-leading:
	case <-time.After(10 * time.Second):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Resign(ctx)
		<-done
		t.Fatalf("%s: the only candidate did not lead within 10s", e.Identity())
	}
	return rec, func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Resign(ctx); err != nil {
			t.Errorf("%s: Resign: %v", e.Identity(), err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Run after Resign: %v", e.Identity(), err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Run did not return after Resign", e.Identity())
		}
	}
}

// Issue 47, item 3: on a quorum Manager (three independent servers, Client
// one of them) the only candidate leads, observers reading that server see
// it, and after Resign the name is free on the quorum and a second
// candidate leads with a greater fence.
func TestLeadsOnQuorum(t *testing.T) {
	var nodes []redis.UniversalClient
	for range 3 {
		nodes = append(nodes, redistest.Start(t).Client(t))
	}
	quorum := func() *lease.Manager {
		q, err := lease.NewQuorum(nodes, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
	newElection := func(id string) *election.Election {
		e, err := election.New(election.Config{Manager: quorum(), Client: nodes[0], Name: "q", Identity: id, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := newElection("a"), newElection("b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	recA, resignA := term(t, a)
	if got, err := b.Leader(ctx); err != nil || got != recA {
		t.Errorf("Leader on the first server while a leads: %+v, %v; want %+v", got, err, recA)
	}
	resignA()
	if _, err := b.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader after a resigned: %v, want ErrNoLeader", err)
	}
	probe, err := quorum().TryAcquire(ctx, "q")
	if err != nil {
		t.Fatalf("the name after a resigned: %v", err)
	}
	_ = probe.Release(ctx)

	recB, resignB := term(t, b)
	if recB.Fence <= recA.Fence {
		t.Errorf("b's fence %d is not above a's %d", recB.Fence, recA.Fence)
	}
	resignB()
}

// Issue 47, item 3: on a leasetest Manager the only candidate leads, and
// Resign ends its term and Run. Its lease never lives on Client's server,
// so no record is written there: observers see no leader.
func TestLeadsOnLeasetest(t *testing.T) {
	srv := leasetest.NewServer()
	m, err := srv.NewManager(lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	client := redistest.Start(t).Client(t)
	e, err := election.New(election.Config{Manager: m, Client: client, Name: "unit", Identity: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec, resign := term(t, e)
	if held, _ := srv.Holder("unit"); !held || rec.Fence == 0 {
		t.Errorf("leading with fence %d, the in-memory lease held: %v", rec.Fence, held)
	}
	if _, err := e.Leader(context.Background()); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader: %v, want ErrNoLeader (no record where the lease does not live)", err)
	}
	time.Sleep(time.Second / 2) // a refresh of the record, which finds no lease there
	if !e.IsLeader() {
		t.Error("the term ended at a refresh of the record")
	}
	resign()
	if held, _ := srv.Holder("unit"); held {
		t.Error("the lease is still held after Resign")
	}
}
