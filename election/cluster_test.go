package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestClusterObserve: on a Cluster an observer hears of each new leader by
// sharded messages (a term's on P{N}:leader:changed, the lease's release on
// P{N}:released), listening on the primary of the name's slot, and follows
// the slot when it moves to another primary. Its RetryPeriod is a minute
// and the lease's TTL 30s: a change seen within seconds was heard.
func TestClusterObserve(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const name = "cluster-scheduler"
	client := cl.Client(t)
	a := newCandidate(t, client, name, "a", 30*time.Second)
	b := newCandidate(t, client, name, "b", 30*time.Second)
	watcher, err := election.New(election.Config{Client: cl.Client(t), Name: name, RetryPeriod: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	octx, ostop := context.WithCancel(ctx)
	defer ostop()
	observed := watcher.Observe(octx)
	if rec := <-observed; rec != (election.Record{}) {
		t.Fatalf("first observation %+v, want no leader", rec)
	}
	changed := "tenure:{" + name + "}:leader:changed"
	owner := ownerOf(ctx, t, client, changed)
	shardSubscribed(ctx, t, cl, owner, changed, 1)

	a.run(t)
	if l := leaderOf(t, 10*time.Second, a); l != a {
		t.Fatal("a does not lead")
	}
	expectLeader(t, observed, "a")

	// Move the name's slot to another primary while a leads.
	var to *redistest.Server
	for _, s := range cl.Nodes() {
		if s.Addr() != owner {
			to = s
			break
		}
	}
	// Every observer there follows it: the watcher, and a's campaign's
	// own (Run observes too).
	listeners := subscribers(ctx, t, cl, owner, changed)
	if err := cl.MoveSlot(ctx, backend.KeySlot(changed), to); err != nil {
		t.Fatal(err)
	}
	shardSubscribed(ctx, t, cl, to.Addr(), changed, listeners)

	b.run(t)
	if err := a.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := leaderOf(t, 10*time.Second, b); l != b {
		t.Fatal("b does not lead after a resigned")
	}
	expectLeader(t, observed, "b")
}

// expectLeader waits for the observer to report id as leader.
func expectLeader(t *testing.T, observed <-chan election.Record, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case rec := <-observed:
			if rec.Identity == id {
				return
			}
		case <-timeout:
			t.Fatalf("the observer did not hear of %s's term (its period is a minute, the lease's TTL 30s)", id)
		}
	}
}

// shardSubscribed waits until the node at addr has at least n sharded
// subscribers of ch.
func shardSubscribed(ctx context.Context, t *testing.T, cl *redistest.Cluster, addr, ch string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for subscribers(ctx, t, cl, addr, ch) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has fewer than %d sharded subscribers of %s", addr, n, ch)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscribers returns how many sharded subscribers of ch the node at addr
// has.
func subscribers(ctx context.Context, t *testing.T, cl *redistest.Cluster, addr, ch string) int64 {
	t.Helper()
	for _, s := range cl.Nodes() {
		if s.Addr() == addr {
			c := s.NewClient()
			defer c.Close()
			return c.PubSubShardNumSub(ctx, ch).Val()[ch]
		}
	}
	t.Fatalf("no node %s", addr)
	return 0
}

// ownerOf returns the address of the primary that serves key.
func ownerOf(ctx context.Context, t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	c, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Options().Addr
}
