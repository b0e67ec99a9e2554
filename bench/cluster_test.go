package main

import (
	"math"
	"testing"
)

// TestClusterMedians checks scenario 8's arithmetic on made-up runs: a
// node's figure is its own work over its own CPU, all nodes' is all the
// work over all the CPU (not a mean of the nodes' figures), and a ratio is
// the single server's figure over this one's within the same run, its
// median over runs.
func TestClusterMedians(t *testing.T) {
	node := func(ops int64, cpu, idle float64) clusterNode { return clusterNode{Ops: ops, CPU: cpu, Idle: idle} }
	rs := []clusterResult{
		// Run 0: the single server does 1,000 cycles a CPU second, the
		// Cluster 800 over all its nodes (2.0 CPU for 1,600).
		{Part: "cycle", Impl: "tenure", Deploy: "cluster", Run: 0, Seconds: 1, Nodes: []clusterNode{node(900, 1.0, 0.1), node(400, 0.5, 0.1), node(300, 0.5, 0.1)}},
		{Part: "cycle", Impl: "tenure", Deploy: "single", Run: 0, Seconds: 1, Nodes: []clusterNode{node(1000, 1.0, 0.1)}},
		// Run 1: the machine is twice as slow for both; the ratio is the
		// same.
		{Part: "cycle", Impl: "tenure", Deploy: "single", Run: 1, Seconds: 1, Nodes: []clusterNode{node(500, 1.0, 0.1)}},
		{Part: "cycle", Impl: "tenure", Deploy: "cluster", Run: 1, Seconds: 1, Nodes: []clusterNode{node(450, 1.0, 0.1), node(200, 0.5, 0.1), node(150, 0.5, 0.1)}},
		// Run 2: the Cluster has a bad run (ratio 2).
		{Part: "cycle", Impl: "tenure", Deploy: "single", Run: 2, Seconds: 1, Nodes: []clusterNode{node(1000, 1.0, 0.1)}},
		{Part: "cycle", Impl: "tenure", Deploy: "cluster", Run: 2, Seconds: 1, Nodes: []clusterNode{node(500, 1.0, 0.1), node(250, 0.5, 0.1), node(250, 0.5, 0.1)}},
	}
	ms := clusterMedians(rs)
	if len(ms) != 2 || ms[0].deploy != "single" || ms[1].deploy != "cluster" {
		t.Fatalf("medians: %+v, want single then cluster", ms)
	}
	c := ms[1]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("cluster all: ratio (median of 1.25, 1.25, 2)", c.all.ratio, 1.25)
	near("cluster all: ratio range high", c.all.ratioHi, 2)
	near("cluster all: per CPU second (median of 800, 400, 500)", c.all.perCPU, 500)
	near("node 1: per CPU second (median of 900, 450, 500)", c.nodes[0].perCPU, 500)
	near("node 1: ratio (median of 1000/900, 500/450, 1000/500)", c.nodes[0].ratio, 1000.0/900)
	// Idle out: run 0's single server did 1,000 in 0.9 CPU s of work, the
	// Cluster 1,600 in 1.7.
	near("cluster all: ratio with idle out, run 0", clusterMedianOf(rs[:1], map[clusterKey]clusterNode{{"cycle", "tenure", 0}: clusterAll(rs[1])}).all.ratioBusy, (1000/0.9)/(1600/1.7))
	near("single: ratio", ms[0].all.ratio, 1)
}

// TestClusterOrder checks that each run measures every implementation on
// every deployment once, and that the first measurement rotates over
// implementations and deployments.
func TestClusterOrder(t *testing.T) {
	firsts := map[clusterMeasure]bool{}
	firstDep := map[int]bool{}
	for run := range 6 {
		seen := map[clusterMeasure]int{}
		order := clusterOrder(clusterCycleImpls, 2, run)
		for _, m := range order {
			seen[m]++
		}
		if len(order) != 6 || len(seen) != 6 {
			t.Errorf("run %d: %v, want each of 3 variants on each of 2 deployments once", run, order)
		}
		firsts[order[0]] = true
		firstDep[order[0].dep] = true
	}
	if len(firsts) < 3 {
		t.Errorf("the first measurement of a run rotated over only %v", firsts)
	}
	if len(firstDep) < 2 {
		t.Errorf("every run began on deployment %v", firstDep)
	}
}
