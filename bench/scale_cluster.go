// The Cluster part of scenario 10 (scale.go): a primary killed while N
// leases are held across a Cluster of 3 primaries with a replica each.
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// scaleCluster is the Cluster part.
func scaleCluster(ctx context.Context, cfg runConfig, sc scaleConfig, b *strings.Builder) error {
	cl, err := redistest.StartCluster(3, 1)
	if err != nil {
		return err
	}
	defer cl.Stop()
	nodes := cl.Nodes()
	for i, s := range nodes {
		if !strings.HasPrefix(s.Addr(), "127.") {
			return fmt.Errorf("refusing to benchmark a non-loopback server %s", s.Addr())
		}
		if sc.pin {
			if err := pinTo(s.Pid(), i); err != nil {
				return err
			}
		}
	}
	d, closeAll := scaleDeployment(ctx, cl)
	defer closeAll()
	// Each manager has a Cluster client of its own, as managers in
	// separate processes would.
	var clients []*redis.ClusterClient
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	ms, err := scaleManagers(func() redis.UniversalClient {
		o := cl.ClusterOptions()
		o.PoolSize = 64
		c := redis.NewClusterClient(o)
		clients = append(clients, c)
		return c
	}, sc.managers)
	if err != nil {
		return err
	}
	defer closeManagers(ms)
	t0 := time.Now()
	held, refused, refusals, err := scaleAcquire(ctx, ms, d, sc.clusterLeases, sc.retryFor)
	if err != nil {
		return err
	}
	acquired := time.Since(t0)
	cfg.logf("  scale cluster: %d leases in %.1fs over %d managers, %d refused in the end, %d refusals retried within %v", sc.clusterLeases-refused, acquired.Seconds(), sc.managers, refused, refusals, sc.retryFor)
	interval := scaleTTL / 3
	before := clusterResult{TTL: scaleTTL, Interval: interval}
	if err := watchHeld(ctx, d, held, interval*time.Duration(sc.rounds), &before); err != nil {
		return err
	}
	lostBefore, _ := lostBy(held)
	cfg.logf("  scale cluster before the kill: %.0f renewals/s, lost %d %s", float64(before.ops())/before.Seconds, lostBefore, perNodeLog(before))
	failover, err := killPrimary(ctx, nodes[0], nodes[3])
	if err != nil {
		return err
	}
	cfg.logf("  scale cluster: primary %s killed, replica %s promoted after %v", nodes[0].Addr(), nodes[3].Addr(), failover.Round(time.Millisecond))
	after := clusterResult{TTL: scaleTTL, Interval: interval}
	if err := watchHeld(ctx, withoutNode0(d), held, interval*time.Duration(sc.rounds+2), &after); err != nil {
		return err
	}
	lost, by := lostBy(held)
	t1 := time.Now()
	closeManagers(ms)
	closed := time.Since(t1)
	scaleClusterReport(b, sc, refused, refusals, acquired, before, after, failover, lost, by, closed)
	return nil
}

// scaleDeployment builds the Cluster part's deployment: every one of the 6
// nodes is watched (a replica's CPU is its replication; the promoted one's
// also its renewals), and a name's node is the group (0-2) of the primary
// that served it at the start.
func scaleDeployment(ctx context.Context, cl *redistest.Cluster) (deployment, func()) {
	o := cl.ClusterOptions()
	o.PoolSize = 64
	cc := redis.NewClusterClient(o)
	closers := []func() error{cc.Close}
	d := deployment{name: "cluster", client: cc, perItem: perItemCluster{cc}}
	index := map[string]int{}
	for i, s := range cl.Nodes() {
		admin := redis.NewClient(s.Options())
		closers = append(closers, admin.Close)
		d.admins, d.addrs = append(d.admins, admin), append(d.addrs, s.Addr())
		index[s.Addr()] = i
	}
	d.nodeOf = nodeIndex(cc, index, 3, d.addrs) // the primaries are nodes 0-2
	return d, func() {
		for _, c := range closers {
			_ = c()
		}
	}
}

// withoutNode0 is d once node 0 is dead and node 3 serves its slots: the
// renewals of node 0's leases are counted to node 3, which takes index 0.
func withoutNode0(d deployment) deployment {
	order := []int{3, 1, 2, 4, 5}
	out := d
	out.admins, out.addrs = nil, nil
	for _, i := range order {
		out.admins, out.addrs = append(out.admins, d.admins[i]), append(out.addrs, d.addrs[i])
	}
	return out
}

// killPrimary kills primary (SIGKILL) and waits for replica to report
// itself a primary; it returns how long that took.
func killPrimary(ctx context.Context, primary, replica *redistest.Server) (time.Duration, error) {
	rc := redis.NewClient(replica.Options())
	defer rc.Close()
	t0 := time.Now()
	if err := primary.Kill(); err != nil {
		return 0, err
	}
	for time.Since(t0) < 60*time.Second {
		s, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(s, "role:master") {
			return time.Since(t0), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("replica %s not promoted within 60s of the kill", replica.Addr())
}

func scaleClusterReport(b *strings.Builder, sc scaleConfig, refused int, refusals int64, acquired time.Duration, before, after clusterResult, failover time.Duration, lost int, by map[string]int, closed time.Duration) {
	fmt.Fprintf(b, "## A Cluster loses a primary\n\n3 primaries (nodes 0-2) with a replica each (nodes 3-5, node 3 replicating node 0), %d leases offered to %d managers (each with its own Cluster client) with TryAcquire, a name refused with ErrOverloaded tried again after a pause for up to %v: %d attempts refused, %d names refused in the end; acquired in %.1fs. Watched for %d rounds, then node 0 killed (SIGKILL): node 3 reported itself primary after %v; watched %d rounds more. Closing the managers (releasing every lease) took %.1fs.\n\n",
		sc.clusterLeases, sc.managers, sc.retryFor, refusals, refused, acquired.Seconds(), sc.rounds, failover.Round(time.Millisecond), sc.rounds+2, closed.Seconds())
	b.WriteString("Nodes are listed in the order they were watched: after the kill, node 3 (the promoted replica) comes first, and the renewals of node 0's leases are counted to it.\n\n| window | # | address | renewals/s | Redis CPU s/s | µs per renewal |\n|---|---:|---|---:|---:|---:|\n")
	for _, w := range []struct {
		name string
		r    clusterResult
	}{{"before the kill", before}, {"after the kill", after}} {
		for i, n := range w.r.Nodes {
			per := "–"
			if n.Ops > 0 {
				per = fmt.Sprintf("%.2f", n.CPU/float64(n.Ops)*1e6)
			}
			fmt.Fprintf(b, "| %s | %d | %s | %.0f | %.3f | %s |\n", w.name, i, n.Addr, float64(n.Ops)/w.r.Seconds, n.CPU/w.r.Seconds, per)
		}
		fmt.Fprintf(b, "| %s | all | | %.0f | %.3f | %.2f |\n", w.name, float64(w.r.ops())/w.r.Seconds, w.r.cpu()/w.r.Seconds, w.r.cpu()/float64(w.r.ops())*1e6)
	}
	fmt.Fprintf(b, "\nRenewals of a node's leases are counted to the node (0-2) that served them at the start, also once node 3 serves node 0's. Worst renewal lateness: %v before, %v after.\n\n**Lost: %d of %d.**\n",
		before.Lateness.Round(time.Millisecond), after.Lateness.Round(time.Millisecond), lost, sc.clusterLeases-refused)
	for _, k := range sortedKeys(by) {
		fmt.Fprintf(b, "- %s: %d\n", k, by[k])
	}
}
