package redisson_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestClientSharesPubSubConnections: a Client holding hundreds of locks
// past the moment holders listen, with waiters besides, holds one classic
// pub/sub connection, and on a Cluster one sharded connection per primary
// besides: not one (or two) per channel.
func TestClientSharesPubSubConnections(t *testing.T) {
	srv := redistest.Start(t).Client(t)
	cluster := redistest.NewCluster(t, 3, 0)
	t.Run("server", func(t *testing.T) { sharesConnections(t, srv, []*redis.Client{srv}, 1) })
	var nodes []*redis.Client
	for _, s := range cluster.Nodes() {
		nodes = append(nodes, s.Client(t))
	}
	t.Run("cluster", func(t *testing.T) { sharesConnections(t, cluster.Client(t), nodes, 1+3) })
}

func sharesConnections(t *testing.T, c redis.UniversalClient, nodes []*redis.Client, most int) {
	ctx := bounded(t, 120*time.Second)
	cl := newClient(t, c)
	const holds, waits = 300, 20
	for i := range holds {
		h, err := cl.GetLock(fmt.Sprintf("share-%d", i)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Unlock(context.Background()) })
	}
	waitOnJavaLocks(ctx, t, c, cl, waits)
	// Every holder and waiter listens, with both kinds on a Cluster.
	want := holds + waits
	if len(nodes) > 1 {
		want *= 2
	}
	for subscribed(ctx, nodes) < want {
		select {
		case <-ctx.Done():
			t.Fatalf("%d subscriptions, want %d", subscribed(ctx, nodes), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	conns := countPubSubConns(ctx, t, nodes)
	t.Logf("%d holders and %d waiters listen on %d pub/sub connections", holds, waits, conns)
	if conns > most {
		t.Fatalf("%d pub/sub connections (CLIENT LIST TYPE pubsub) for %d channels, want at most %d", conns, holds+waits, most)
	}
}

// waitOnJavaLocks has n waiters of cl wait, until the test ends, on locks
// a Java client holds.
func waitOnJavaLocks(ctx context.Context, t *testing.T, c redis.UniversalClient, cl *redisson.Client, n int) {
	t.Helper()
	// The waiters stop before the locks go.
	var names []string
	for i := range n {
		name := fmt.Sprintf("share-java-%d", i)
		if err := c.HSet(ctx, name, "java-client:1", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpire(ctx, name, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Del(context.Background(), name) })
		names = append(names, name)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(stop)
	for _, name := range names {
		wg.Go(func() {
			if _, err := cl.GetLock(name).Lock(wctx); !errors.Is(err, lease.ErrNotAcquired) && !errors.Is(err, context.Canceled) {
				t.Errorf("a waiter on a lock Java holds: %v", err)
			}
		})
	}
}

// countPubSubConns counts the pub/sub connections of nodes (CLIENT LIST TYPE
// pubsub: subscribed to a channel of any kind).
func countPubSubConns(ctx context.Context, t *testing.T, nodes []*redis.Client) int {
	t.Helper()
	conns := 0
	for _, n := range nodes {
		list, err := n.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.HasPrefix(line, "id=") {
				conns++
			}
		}
	}
	return conns
}

// subscribed counts the channels subscribed on nodes, classic and
// sharded, of the locks of sharesConnections.
func subscribed(ctx context.Context, nodes []*redis.Client) int {
	n := 0
	for _, node := range nodes {
		n += len(node.PubSubChannels(ctx, "redisson_lock__channel:{share-*").Val())
		n += len(node.PubSubShardChannels(ctx, "redisson_lock__channel:{share-*").Val())
	}
	return n
}

// TestForceAcrossPubSubReconnection: a force unlock whose message the
// holder's pub/sub connection never gets (the server drops the connection
// in the same transaction: the classic one, or on a Cluster the sharded
// one of the lock's primary) still ends the hold, with ErrForceUnlocked:
// once the connection broke, and once its subscriptions were made anew,
// the holder looks, rather than waiting for its next renewal.
func TestForceAcrossPubSubReconnection(t *testing.T) {
	srv := redistest.Start(t).Client(t)
	cluster := redistest.NewCluster(t, 3, 0).Client(t)
	t.Run("server", func(t *testing.T) { forceAcrossReconnection(t, srv, "PUBLISH") })
	t.Run("cluster-sharded", func(t *testing.T) { forceAcrossReconnection(t, cluster, "SPUBLISH") })
}

func forceAcrossReconnection(t *testing.T, c redis.UniversalClient, publish string) {
	ctx := bounded(t, 60*time.Second)
	cl := newClient(t, c)
	name := "reconnect-" + uuid()
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	channel := "redisson_lock__channel:{" + name + "}"
	waitSubscribed(ctx, t, c, publish, channel)
	node := ownerOf(ctx, t, c, name)
	// The connection that hears publish: on a Cluster the sharded one
	// alone, so that its own reconnection is what has the holder look.
	kind := "sub="
	if publish == "SPUBLISH" {
		kind = "ssub="
	}
	victim := pubsubConn(ctx, t, node, kind)
	var kill *redis.IntCmd
	_, err = node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		kill = p.ClientKillByFilter(ctx, "ID", victim)
		p.Del(ctx, name)
		p.Do(ctx, publish, channel, "0")
		return nil
	})
	if err != nil || kill.Val() != 1 {
		t.Fatalf("kill the pub/sub connection, force, publish: %v (%d killed)", err, kill.Val())
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the holder never noticed the force unlock")
	}
	cause := context.Cause(h.Context())
	if !errors.Is(cause, lease.ErrLost) || !errors.Is(cause, redisson.ErrForceUnlocked) {
		t.Fatalf("cause %v, want ErrLost and ErrForceUnlocked (a look, not a renewal, found the force)", cause)
	}
}

// pubsubConn returns the id of node's pub/sub connection subscribed with
// kind ("sub=" or "ssub=").
func pubsubConn(ctx context.Context, t *testing.T, node *redis.Client, kind string) string {
	t.Helper()
	list, err := node.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " "+kind) && !strings.Contains(line, " "+kind+"0 ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
			return id
		}
	}
	t.Fatalf("no pub/sub connection with %s on %s:\n%s", kind, node.Options().Addr, list)
	return ""
}

// ownerOf returns the server that holds name: c itself, or its Cluster
// primary.
func ownerOf(ctx context.Context, t *testing.T, c redis.UniversalClient, name string) *redis.Client {
	t.Helper()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c.(*redis.Client)
	}
	node, err := cc.MasterForKey(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return node
}
