package lease_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestClusterNotifications: on a Cluster, releases are sharded messages
// (docs/design.md section 5). They cost the nodes that do not own a name
// nothing, a waiter on any primary is woken by the release at once, and
// it still is after its name's slot moved to another primary and after
// its primary failed over. The subtests share one cluster of three
// primaries with a replica each; the last one kills a primary.
func TestClusterNotifications(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc := cl.Client(t)
	// The waiters' backoff is a minute and the holders' TTL half of one:
	// a waiter that gets its name within seconds of the release was woken
	// by its message.
	hc := cl.Client(t)
	holder := newManager(t, hc, lease.WithTTL(30*time.Second))
	waiter := newManager(t, cl.Client(t), lease.WithTTL(30*time.Second), lease.WithBackOff(slowPolling))
	// handoff has holder take name and waiter wait for it; once the
	// waiter's manager listens on the name's primary, move (if not nil)
	// changes the primary and returns the new one's address, where the
	// waiter's manager must listen too. Then the holder releases, and the
	// waiter must get the name well before its backoff or the holder's
	// TTL would have let it try.
	handoff := func(t *testing.T, name string, move func(channel string) string) {
		t.Helper()
		held, err := holder.Acquire(ctx, name)
		if err != nil {
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
		ch := "tenure:{" + name + "}:released"
		owner := ownerOf(ctx, t, cc, ch)
		listening(ctx, t, cl, owner, ch, got)
		if move != nil {
			owner = move(ch)
			listening(ctx, t, cl, owner, ch, got)
			// The holder's client must find the new primary too.
			waitFor(t, 20*time.Second, func() bool {
				hc.ReloadState(ctx)
				return ownerOf(ctx, t, hc, ch) == owner
			})
		}
		if err := held.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", name, err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: waiter: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the waiter was not woken by the release (its backoff is a minute, the TTL 30s)", name)
		}
	}

	t.Run("OtherNodesUnmoved", func(t *testing.T) { testOtherNodesUnmoved(ctx, t, cl, cc, holder) })
	t.Run("HandoffOnEveryPrimary", func(t *testing.T) {
		for _, p := range cl.Nodes()[:3] {
			handoff(t, nameOn(ctx, t, cc, p.Addr(), "hand"), nil)
		}
	})
	t.Run("SlotMigration", func(t *testing.T) {
		from, to := cl.Nodes()[0], cl.Nodes()[1]
		name := nameOn(ctx, t, cc, from.Addr(), "moving")
		handoff(t, name, func(ch string) string {
			if err := cl.MoveSlot(ctx, backend.KeySlot(ch), to); err != nil {
				t.Fatal(err)
			}
			return to.Addr()
		})
	})
	t.Run("ManualFailover", func(t *testing.T) {
		primary := cl.Nodes()[1]
		name := nameOn(ctx, t, cc, primary.Addr(), "handing")
		handoff(t, name, func(string) string {
			replica := clusterReplicaOf(ctx, t, cl, primary)
			if err := replica.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, func() bool {
				return strings.Contains(replica.Info(ctx, "replication").Val(), "role:master")
			})
			return replica.Options().Addr
		})
	})
	t.Run("Failover", func(t *testing.T) {
		primary := cl.Nodes()[2]
		name := nameOn(ctx, t, cc, primary.Addr(), "failing")
		handoff(t, name, func(string) string {
			replica := clusterReplicaOf(ctx, t, cl, primary)
			primary.MustKill(t)
			waitFor(t, 30*time.Second, func() bool {
				return strings.Contains(replica.Info(ctx, "replication").Val(), "role:master")
			})
			return replica.Options().Addr
		})
	})
}

// listening waits until the node at addr has one sharded subscriber of ch,
// the waiter's manager; the waiter, whose end got reports, must still wait.
func listening(ctx context.Context, t *testing.T, cl *redistest.Cluster, addr, ch string, got <-chan error) {
	t.Helper()
	c := nodeClient(t, cl, addr)
	deadline := time.Now().Add(20 * time.Second)
	for c.PubSubShardNumSub(ctx, ch).Val()[ch] != 1 {
		select {
		case err := <-got:
			t.Fatalf("the waiter on %s ended before the release: %v", ch, err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no sharded subscriber of %s", addr, ch)
		}
	}
}

// testOtherNodesUnmoved releases names of one primary many times, and
// checks that no other node but that primary's replica heard of it over
// the cluster bus, where a classic PUBLISH goes to every node.
func testOtherNodesUnmoved(ctx context.Context, t *testing.T, cl *redistest.Cluster, cc *redis.ClusterClient, m *lease.Manager) {
	owner := cl.Nodes()[0]
	var names []string
	for i := 0; len(names) < 10; i++ {
		n := fmt.Sprintf("quiet-%d", i)
		if ownerOf(ctx, t, cc, "tenure:{"+n+"}") == owner.Addr() {
			names = append(names, n)
		}
	}
	replica := clusterReplicaOf(ctx, t, cl, owner).Options().Addr
	var others []*redis.Client
	for _, s := range cl.Nodes() {
		if s.Addr() != owner.Addr() && s.Addr() != replica {
			others = append(others, s.Client(t))
		}
	}
	before := make([]map[string]int64, len(others))
	for i, c := range others {
		before[i] = busStats(ctx, t, c)
	}
	spublished := commandCalls(ctx, t, owner.Client(t), "spublish")
	const releases = 200
	for i := range releases {
		l, err := m.Acquire(ctx, names[i%len(names)])
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := commandCalls(ctx, t, owner.Client(t), "spublish") - spublished; got < releases {
		t.Errorf("the owner ran SPUBLISH %d times for %d releases", got, releases)
	}
	// A classic message the owner publishes now reaches each node after
	// any the releases sent it over the bus (one link, in order): once a
	// subscriber there has it, the counts are final.
	markers := make([]*redis.PubSub, len(others))
	for i, c := range others {
		markers[i] = c.Subscribe(ctx, "tenure:marker")
		defer markers[i].Close()
		if _, err := markers[i].Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := owner.Client(t).Publish(ctx, "tenure:marker", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for i, c := range others {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := markers[i].ReceiveMessage(rctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: no marker: %v", c.Options().Addr, err)
		}
		after := busStats(ctx, t, c)
		for _, k := range []string{"publish_received", "publishshard_received"} {
			want := before[i][k]
			if k == "publish_received" {
				want++ // the marker
			}
			if after[k] != want {
				t.Errorf("%s: cluster_stats_messages_%s went from %d to %d over %d releases elsewhere (%d with the marker expected)",
					c.Options().Addr, k, before[i][k], after[k], releases, want)
			}
		}
	}
}

// busStats returns a node's cluster bus message counts (CLUSTER INFO's
// cluster_stats_messages_*), without the prefix.
func busStats(ctx context.Context, t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if k, found := strings.CutPrefix(k, "cluster_stats_messages_"); ok && found {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}

// commandCalls returns how many times the node ran cmd (INFO
// commandstats), a script's calls included.
func commandCalls(ctx context.Context, t *testing.T, c *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

// nameOn returns a name, starting with prefix, whose keys live on the
// primary at addr.
func nameOn(ctx context.Context, t *testing.T, cc *redis.ClusterClient, addr, prefix string) string {
	t.Helper()
	for i := range 1000 {
		n := fmt.Sprintf("%s-%d", prefix, i)
		if ownerOf(ctx, t, cc, "tenure:{"+n+"}") == addr {
			return n
		}
	}
	t.Fatalf("no name for %s", addr)
	return ""
}

// ownerOf returns the address of the primary that serves key, as cc's
// slot map has it.
func ownerOf(ctx context.Context, t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	c, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Options().Addr
}

// clusterReplicaOf returns a client of primary's replica.
func clusterReplicaOf(ctx context.Context, t *testing.T, cl *redistest.Cluster, primary *redistest.Server) *redis.Client {
	t.Helper()
	for _, s := range cl.Nodes() {
		info := s.Client(t).Info(ctx, "replication").Val()
		if strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+strconv.Itoa(primary.Port())+"\r\n") {
			return s.Client(t)
		}
	}
	t.Fatalf("no replica of %s", primary.Addr())
	return nil
}

// nodeClient returns a client of the node at addr.
func nodeClient(t *testing.T, cl *redistest.Cluster, addr string) *redis.Client {
	t.Helper()
	for _, s := range cl.Nodes() {
		if s.Addr() == addr {
			return s.Client(t)
		}
	}
	t.Fatalf("no node %s", addr)
	return nil
}

// TestClusterNotificationsWithoutSSUBSCRIBE: a primary that does not know
// SSUBSCRIBE (Redis 6.2; here a 7.0 with the command renamed away) is
// listened to with SUBSCRIBE, and a classic message on the name's channel,
// which spublish.lua sends on such a server, wakes the waiter.
func TestClusterNotificationsWithoutSSUBSCRIBE(t *testing.T) {
	cl := redistest.NewClusterConfig(t, redistest.Config{Args: []string{"--rename-command", "SSUBSCRIBE", ""}}, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc := cl.Client(t)
	holder := newManager(t, cl.Client(t), lease.WithTTL(30*time.Second))
	waiter := newManager(t, cl.Client(t), lease.WithTTL(30*time.Second), lease.WithBackOff(slowPolling))
	name := "old"
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
	ch := "tenure:{" + name + "}:released"
	owner := nodeClient(t, cl, ownerOf(ctx, t, cc, ch))
	waitFor(t, 20*time.Second, func() bool { return owner.PubSubNumSub(ctx, ch).Val()[ch] == 1 })
	// The name freed without a word, then the word a Redis 6.2 would send.
	if err := owner.Del(ctx, "tenure:{"+name+"}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := owner.Publish(ctx, ch, "released").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the classic message (its backoff is a minute, the TTL 30s)")
	}
}
