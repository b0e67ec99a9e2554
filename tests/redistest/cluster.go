package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// ClusterNodeTimeout is the cluster-node-timeout of nodes started by
	// StartCluster: short, so a test that pauses or kills a primary sees
	// a failover within a few seconds, yet long enough not to flap on a
	// loaded CI machine.
	ClusterNodeTimeout = 2 * time.Second

	// groupReadyTimeout bounds how long StartCluster and StartSentinel
	// wait for the group to settle.
	groupReadyTimeout = 30 * time.Second

	clusterSlots = 16384
)

// Cluster is a Redis Cluster of real redis-server processes on 127.0.0.1.
type Cluster struct {
	nodes     []*Server
	primaries int
	replicas  int
	certs     *Certs // nil unless the nodes are TLS-only
}

// StartCluster starts primaries*(1+replicasPerPrimary) cluster-enabled nodes
// on free ports, splits the 16384 slots evenly over the primaries, and
// attaches replicasPerPrimary replicas to each, all driven from Go with
// CLUSTER ADDSLOTSRANGE / MEET / REPLICATE (no redis-cli needed). It returns
// once every node reports cluster_state:ok, every node sees every replica, and
// every replica's link to its primary is up. The caller must call Stop.
func StartCluster(primaries, replicasPerPrimary int) (*Cluster, error) {
	return StartClusterConfig(Config{}, primaries, replicasPerPrimary)
}

// StartClusterConfig is StartCluster with cfg for every node. With cfg.TLS
// the nodes are TLS-only, and the cluster bus and replication run over TLS
// too (tls-cluster, tls-replication); all nodes share one Certs (fresh ones
// when cfg.TLS.Certs is nil), and ClusterOptions carries the TLS
// configuration.
func StartClusterConfig(cfg Config, primaries, replicasPerPrimary int) (*Cluster, error) {
	if primaries < 1 || replicasPerPrimary < 0 {
		return nil, fmt.Errorf("redistest: StartCluster(%d, %d): need at least one primary and no negative replica count", primaries, replicasPerPrimary)
	}
	cfg, err := shareCerts(cfg)
	if err != nil {
		return nil, err
	}
	n := primaries * (1 + replicasPerPrimary)
	nodes, err := startMany(n, func(int) (*Server, error) {
		return startServer(cfg, kindCluster, "")
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{nodes: nodes, primaries: primaries, replicas: replicasPerPrimary}
	if cfg.TLS != nil {
		c.certs = cfg.TLS.Certs
	}
	if err := c.form(); err != nil {
		err = fmt.Errorf("redistest: forming cluster: %w%s", err, logTails(nodes))
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// NewCluster is StartCluster for tests: it fails the test (never skips) on
// error and stops the cluster in tb.Cleanup.
func NewCluster(tb testing.TB, primaries, replicasPerPrimary int) *Cluster {
	tb.Helper()
	return NewClusterConfig(tb, Config{}, primaries, replicasPerPrimary)
}

// NewClusterConfig is StartClusterConfig for tests, as NewCluster is
// StartCluster's.
func NewClusterConfig(tb testing.TB, cfg Config, primaries, replicasPerPrimary int) *Cluster {
	tb.Helper()
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	c, err := StartClusterConfig(cfg, primaries, replicasPerPrimary)
	if err != nil {
		tb.Fatal(err)
	}
	cleanupGroup(tb, "cluster", c.Stop, c.nodes...)
	return c
}

// Addrs returns the addresses of all nodes, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns all nodes. The first `primaries` were started as primaries
// (owning consecutive slot ranges in order); node primaries+k was attached
// as a replica of primary k%primaries. Roles change if a failover happens.
func (c *Cluster) Nodes() []*Server { return append([]*Server(nil), c.nodes...) }

// Certs returns the certificates of a TLS cluster's nodes, nil for a plain
// one.
func (c *Cluster) Certs() *Certs { return c.certs }

// ClusterOptions returns go-redis cluster options seeded with every node,
// with ContextTimeoutEnabled and a short DialTimeout; on a TLS cluster, TLS
// that trusts its authority and presents the client certificate.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	o := &redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
	}
	if c.certs != nil {
		o.TLSConfig = c.certs.ClientConfig(true)
	}
	return o
}

// NewClient returns a go-redis ClusterClient; the caller closes it.
func (c *Cluster) NewClient() *redis.ClusterClient { return redis.NewClusterClient(c.ClusterOptions()) }

// Client returns a go-redis ClusterClient closed in tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := c.NewClient()
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Stop stops every node; it is idempotent.
func (c *Cluster) Stop() error { return stopAll(c.nodes) }

// MoveSlot moves slot, keys and all, from the primary that serves it to
// the primary to, as a resharding does: CLUSTER SETSLOT IMPORTING on to,
// MIGRATING on the source, MIGRATE of its keys, then SETSLOT NODE on every
// primary. Clients of the source that subscribed to the slot's sharded
// channels are unsubscribed by the source (Redis 7.0 and later).
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to *Server) error {
	dst := to.NewClient()
	defer dst.Close()
	nodes, err := clusterNodes(ctx, dst)
	if err != nil {
		return err
	}
	ids := map[string]string{}
	var primaries []string
	for _, n := range nodes {
		addr, _, _ := strings.Cut(n.addr, "@")
		ids[addr] = n.id
		if n.has("master") && !n.has("fail") {
			primaries = append(primaries, addr)
		}
	}
	src, err := slotOwner(ctx, dst, slot)
	if err != nil {
		return err
	}
	if src == to.Addr() {
		return nil
	}
	srcC := c.clientOf(src)
	defer srcC.Close()
	steps := []struct {
		c    *redis.Client
		args []any
	}{
		{dst, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src]}},
		{srcC, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to.Addr()]}},
	}
	for _, st := range steps {
		if err := st.c.Do(ctx, st.args...).Err(); err != nil {
			return fmt.Errorf("%v on %s: %w", st.args, st.c.Options().Addr, err)
		}
	}
	if err := migrateKeys(ctx, srcC, slot, to); err != nil {
		return err
	}
	for _, addr := range primaries {
		p := c.clientOf(addr)
		err := p.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to.Addr()]).Err()
		_ = p.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER SETSLOT %d NODE on %s: %w", slot, addr, err)
		}
	}
	return nil
}

// clientOf returns a client of the node at addr.
func (c *Cluster) clientOf(addr string) *redis.Client {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s.NewClient()
		}
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// slotOwner returns the address of the primary that serves slot, as cl's
// node sees it.
func slotOwner(ctx context.Context, cl *redis.Client, slot int) (string, error) {
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					port := n.Port
					if port == 0 { // a TLS-only node
						port = n.TLSPort
					}
					return net.JoinHostPort(n.IP, strconv.FormatInt(port, 10)), nil
				}
			}
		}
	}
	return "", fmt.Errorf("slot %d is served by no node", slot)
}

// migrateKeys moves every key of slot from src to to, in batches.
func migrateKeys(ctx context.Context, src *redis.Client, slot int, to *Server) error {
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port(), "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE of slot %d's keys: %w", slot, err)
		}
	}
}

// form turns the started nodes into a cluster.
func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), groupReadyTimeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = s.NewClient()
	}
	defer closeAll(clients)

	ids := make([]string, len(c.nodes))
	for i, cl := range clients {
		id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", c.nodes[i].Addr(), err)
		}
		ids[i] = id
		// Distinct config epochs before meeting, as redis-cli does, so
		// the nodes need not resolve epoch collisions first.
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", c.nodes[i].Addr(), err)
		}
	}
	for i := range c.primaries {
		lo := i * clusterSlots / c.primaries
		hi := (i+1)*clusterSlots/c.primaries - 1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.nodes[i].Addr(), err)
		}
	}
	for i := 1; i < len(c.nodes); i++ {
		s := c.nodes[i]
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.busPort).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", s.Addr(), err)
		}
	}
	// REPLICATE needs the replica to know its primary, so wait for the
	// gossip to spread the full membership first.
	err := poll(ctx, func() error {
		for i, cl := range clients {
			nodes, err := clusterNodes(ctx, cl)
			if err != nil {
				return err
			}
			if len(nodes) != len(c.nodes) {
				return fmt.Errorf("%s knows %d of %d nodes", c.nodes[i].Addr(), len(nodes), len(c.nodes))
			}
			for _, n := range nodes {
				if n.has("handshake") || n.has("noaddr") {
					return fmt.Errorf("%s sees %s as %s", c.nodes[i].Addr(), n.addr, n.flags)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k := range c.primaries * c.replicas {
		r, p := c.primaries+k, k%c.primaries
		if err := clients[r].Do(ctx, "CLUSTER", "REPLICATE", ids[p]).Err(); err != nil {
			return fmt.Errorf("CLUSTER REPLICATE on %s: %w", c.nodes[r].Addr(), err)
		}
	}
	return poll(ctx, func() error {
		for i, cl := range clients {
			info, err := cl.Do(ctx, "CLUSTER", "INFO").Text()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster_state not ok", c.nodes[i].Addr())
			}
			nodes, err := clusterNodes(ctx, cl)
			if err != nil {
				return err
			}
			replicas := 0
			for _, n := range nodes {
				if n.has("fail") || n.has("fail?") || n.has("handshake") {
					return fmt.Errorf("%s sees %s as %s", c.nodes[i].Addr(), n.addr, n.flags)
				}
				if n.has("slave") {
					replicas++
				}
			}
			if replicas != c.primaries*c.replicas {
				return fmt.Errorf("%s sees %d of %d replicas", c.nodes[i].Addr(), replicas, c.primaries*c.replicas)
			}
		}
		for r := c.primaries; r < len(c.nodes); r++ {
			if err := replicaLinkUp(ctx, clients[r]); err != nil {
				return fmt.Errorf("%s: %w", c.nodes[r].Addr(), err)
			}
		}
		return nil
	})
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags string
}

func (n clusterNode) has(flag string) bool {
	for f := range strings.SplitSeq(n.flags, ",") {
		if f == flag {
			return true
		}
	}
	return false
}

func clusterNodes(ctx context.Context, cl *redis.Client) ([]clusterNode, error) {
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		out = append(out, clusterNode{id: f[0], addr: f[1], flags: f[2]})
	}
	return out, nil
}

// replicaLinkUp checks that cl is a replica whose link to its primary is up.
func replicaLinkUp(ctx context.Context, cl *redis.Client) error {
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:slave") {
		return errors.New("not a replica yet")
	}
	if !strings.Contains(info, "master_link_status:up") {
		return errors.New("replication link not up yet")
	}
	return nil
}

// shareCerts gives a group's TLS config one set of certificates for every
// member, made here if cfg names none, so that they all trust each other.
func shareCerts(cfg Config) (Config, error) {
	if cfg.TLS == nil || cfg.TLS.Certs != nil {
		return cfg, nil
	}
	certs, err := NewCerts()
	if err != nil {
		return cfg, err
	}
	t := *cfg.TLS
	t.Certs = certs
	cfg.TLS = &t
	return cfg, nil
}

// poll calls f every 50ms until it succeeds or ctx ends; the error then
// includes f's last complaint, which says what never converged.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startMany starts n servers concurrently (a redis start takes tens of
// milliseconds, mostly waiting) and stops the ones that came up if any failed.
func startMany(n int, start func(i int) (*Server, error)) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = start(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var started []*Server
		for _, s := range servers {
			if s != nil {
				started = append(started, s)
			}
		}
		_ = stopAll(started)
		return nil, err
	}
	return servers, nil
}

// stopAll stops servers concurrently and joins the errors.
func stopAll(servers []*Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s.Addr(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// logTails formats the last log lines of each server for a group's startup
// error, since Stop is about to delete the logs.
func logTails(servers []*Server) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "\n--- %s (tail) ---\n%s", s.LogPath(), logTail(s.LogPath(), 10))
	}
	return b.String()
}

func closeAll[C interface{ Close() error }](cs []C) {
	for _, c := range cs {
		_ = c.Close()
	}
}
