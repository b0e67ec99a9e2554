package main

// Scenario 8: outgrowing one Redis. tenure on a 3-primary Redis Cluster
// against tenure on a single redis-server, both started by this scenario on
// loopback and measured in the same run, in a rotating order. What it
// measures is Redis CPU, node by node (INFO cpu: used_cpu_sys +
// used_cpu_user): how much work a node does per second of its CPU, for
//
//   - the uncontended cycle (acquire + release of fresh names by
//     lease.Manager.Acquire from 32 goroutines, as in scenario 1): cycles
//     per Redis CPU second. Two raw controls run beside it on the same keys:
//     SET NX PX + a compare-and-delete script (scenario 1's baseline), and
//     the same with a PUBLISH in the script, as tenure's release.lua sends
//     one: they tell the Cluster's own cost per command, and what a PUBLISH
//     costs on a Cluster, which sends it to every node over its bus;
//   - leases held at TTL 10s, renewed every 3.33s (30,000; -short: 3,000):
//     renewals per Redis CPU second.
//
// Each cycle and each renewal is counted to the node that serves its name's
// lease key (the Cluster client's slot map). A node's figure is its work ÷
// its CPU; the Cluster's per-node figure is all its work ÷ all its nodes'
// CPU. The target (issue 32, target 3) is that the Cluster's per-node
// figure be within 1.1× of the single server's: on a Cluster the backend
// batches renewals per node (renew_node.lua), which should cost what
// batching on one server costs. Per-slot batching cannot be chosen from
// outside the library (the backend decides by the client's type), so the
// held leases also run with tenure behind a client type the backend does
// not know (tenure-per-item: one renew.lua call per lease, on both
// deployments), which is what batching by slot came to on a Cluster: its
// 16,384 slots hold about one due lease each. Each node's idle CPU (no
// client but the harness's, measured at the start of every run) is
// recorded too, since it is counted in every window and weighs more on a
// node that serves a third of the work. Outside -short a third deployment,
// a Cluster of one primary serving every slot (cluster-1), tells what
// cluster mode costs by itself from what splitting the work over nodes
// costs. The report and cluster.png are in cluster_report.go.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// clusterTTL is the TTL of scenario 8's leases; they renew every third of it.
const clusterTTL = 10 * time.Second

// clusterCycleGoroutines is scenario 8's cycle parallelism, scenario 1's.
const clusterCycleGoroutines = 32

// clusterNode is one node's share of one measurement.
type clusterNode struct {
	Addr string
	Ops  int64   // cycles or renewals of names this node serves, in the window
	CPU  float64 // its Redis CPU seconds in the window
	Idle float64 // its Redis CPU seconds a second while idle, this run
}

// clusterResult is one measurement of one deployment.
type clusterResult struct {
	Part       string // "cycle" or "hold"
	Deploy     string // "single" or "cluster"
	Impl       string // "tenure"; "baseline", "baseline+publish" (cycle); "tenure-per-item" (hold)
	Run        int
	Seconds    float64 // the measured window
	Nodes      []clusterNode
	Goroutines int           `json:",omitempty"` // cycle
	Leases     int           `json:",omitempty"` // hold
	TTL        time.Duration `json:",omitempty"`
	Interval   time.Duration `json:",omitempty"`
	AcquireSec float64       `json:",omitempty"`
	Lateness   time.Duration `json:",omitempty"` // worst renewal lateness
	Lost       int
	Refused    int
	Errors     int64
}

// ops is the work of all nodes, cpu their CPU seconds.
func (r clusterResult) ops() (n int64) {
	for _, nd := range r.Nodes {
		n += nd.Ops
	}
	return n
}

func (r clusterResult) cpu() (s float64) {
	for _, nd := range r.Nodes {
		s += nd.CPU
	}
	return s
}

// perCPU is the deployment's figure: work per Redis CPU second, all nodes'
// work over all nodes' CPU.
func (r clusterResult) perCPU() float64 { return float64(r.ops()) / r.cpu() }

// A deployment is what tenure runs against: a client (and the same client
// behind a type the backend does not know), and an admin client and
// address per primary.
type deployment struct {
	name    string
	client  redis.UniversalClient
	perItem redis.UniversalClient
	admins  []*redis.Client
	addrs   []string
	// nodeOf returns the index of the node serving name's lease key.
	nodeOf func(ctx context.Context, name string) (int, error)
}

// perItemCluster hides a *redis.ClusterClient behind a type the backend
// does not know, so that it renews each lease with its own renew.lua call
// (perItemClient's counterpart for a Cluster).
type perItemCluster struct{ *redis.ClusterClient }

// cpu returns each node's Redis CPU seconds so far.
func (d deployment) cpu(ctx context.Context) ([]float64, error) {
	out := make([]float64, len(d.admins))
	for i, a := range d.admins {
		out[i] = redisCPU(ctx, a)
		if out[i] == 0 {
			return nil, fmt.Errorf("%s: no INFO cpu from %s", d.name, d.addrs[i])
		}
	}
	return out, nil
}

// flush empties every node, so that each measurement starts from the same
// keyspace.
func (d deployment) flush(ctx context.Context) error {
	for _, a := range d.admins {
		if err := a.FlushAll(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// nodes fills in each node's address, work and CPU of a window that began
// at cpu0.
func (d deployment) nodes(ctx context.Context, cpu0 []float64, ops []int64) ([]clusterNode, error) {
	cpu1, err := d.cpu(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]clusterNode, len(d.admins))
	for i := range out {
		out[i] = clusterNode{Addr: d.addrs[i], Ops: ops[i], CPU: cpu1[i] - cpu0[i]}
	}
	return out, nil
}

// clusterLab is the scenario's servers and the deployments over them.
type clusterLab struct {
	deps    []deployment // single, cluster (3 primaries), cluster-1 (if asked for)
	closers []func() error
}

func (l *clusterLab) close() {
	for _, c := range l.closers {
		_ = c()
	}
}

// newClusterLab starts a single redis-server and a Cluster of 3 primaries
// without replicas, with the same configuration; with one, also a Cluster
// of one primary serving all 16,384 slots: cluster mode without the split.
func newClusterLab(ctx context.Context, one bool) (*clusterLab, error) {
	l := &clusterLab{}
	single, err := startLoopbackServer()
	if err != nil {
		return nil, err
	}
	l.closers = append(l.closers, single.Stop)
	l.deps = append(l.deps, l.singleDeployment(single))
	sizes := map[string]int{"cluster": 3}
	if one {
		sizes["cluster-1"] = 1
	}
	for _, name := range []string{"cluster", "cluster-1"} {
		if sizes[name] == 0 {
			continue
		}
		d, err := l.clusterDeployment(ctx, name, sizes[name])
		if err != nil {
			l.close()
			return nil, err
		}
		l.deps = append(l.deps, d)
	}
	return l, nil
}

func (l *clusterLab) singleDeployment(single *redistest.Server) deployment {
	o := single.Options()
	o.PoolSize = acquirers
	c := redis.NewClient(o)
	admin := redis.NewClient(single.Options())
	l.closers = append([]func() error{c.Close, admin.Close}, l.closers...)
	return deployment{name: "single", client: c, perItem: perItemClient{c}, admins: []*redis.Client{admin}, addrs: []string{single.Addr()},
		nodeOf: func(context.Context, string) (int, error) { return 0, nil }}
}

// clusterDeployment starts a Cluster of primaries without replicas and
// builds its deployment: a Cluster client whose slot map says which node
// serves a name.
func (l *clusterLab) clusterDeployment(ctx context.Context, name string, primaries int) (deployment, error) {
	cl, err := redistest.StartCluster(primaries, 0)
	if err != nil {
		return deployment{}, err
	}
	l.closers = append(l.closers, cl.Stop)
	o := cl.ClusterOptions()
	o.PoolSize = acquirers
	cc := redis.NewClusterClient(o)
	l.closers = append([]func() error{cc.Close}, l.closers...)
	d := deployment{name: name, client: cc, perItem: perItemCluster{cc}}
	index := map[string]int{}
	for i, s := range cl.Nodes() {
		if !strings.HasPrefix(s.Addr(), "127.") {
			return d, fmt.Errorf("refusing to benchmark a non-loopback server %s", s.Addr())
		}
		admin := redis.NewClient(s.Options())
		l.closers = append([]func() error{admin.Close}, l.closers...)
		d.admins, d.addrs = append(d.admins, admin), append(d.addrs, s.Addr())
		index[s.Addr()] = i
	}
	d.nodeOf = nodeIndex(cc, index, len(index), d.addrs)
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
	return d, err
}

// nodeIndex returns a deployment's nodeOf: the index, below limit, of the
// primary that serves name's lease key as cc's slot map says.
func nodeIndex(cc *redis.ClusterClient, index map[string]int, limit int, addrs []string) func(ctx context.Context, name string) (int, error) {
	return func(ctx context.Context, name string) (int, error) {
		c, err := cc.MasterForKey(ctx, clusterLayout.Lease(name))
		if err != nil {
			return 0, err
		}
		i, ok := index[c.Options().Addr]
		if !ok || i >= limit {
			return 0, fmt.Errorf("%s is served by %s, not one of %v", name, c.Options().Addr, addrs[:limit])
		}
		return i, nil
	}
}

// runCluster runs scenario 8: per run, each node's idle CPU, then each
// cycle variant on each deployment, then the held leases on each, in an
// order that rotates from run to run.
func runCluster(ctx context.Context, cfg runConfig) ([]clusterResult, error) {
	lab, err := newClusterLab(ctx, cfg.clusterOne)
	if err != nil {
		return nil, err
	}
	defer lab.close()
	var seq atomic.Int64
	var out []clusterResult
	holds := []string{"tenure"}
	if cfg.clusterPerItem {
		holds = append(holds, "tenure-per-item")
	}
	for run := range cfg.clusterRuns {
		idle, err := idleRates(ctx, lab.deps, cfg.clusterIdle)
		if err != nil {
			return out, err
		}
		for _, m := range clusterOrder(clusterCycleImpls, len(lab.deps), run) {
			r, err := clusterCycle(ctx, cfg, m.d(lab), m.impl, &seq)
			if err != nil {
				return out, fmt.Errorf("cluster cycle %s on %s: %w", m.impl, m.d(lab).name, err)
			}
			out = append(out, withIdle(r, run, idle))
		}
		for _, m := range clusterOrder(holds, len(lab.deps), run) {
			r, err := clusterHold(ctx, cfg, m.d(lab), m.impl == "tenure-per-item")
			if err != nil {
				return out, fmt.Errorf("cluster hold %s on %s: %w", m.impl, m.d(lab).name, err)
			}
			out = append(out, withIdle(r, run, idle))
		}
	}
	return out, nil
}

// A clusterMeasure is one implementation on one deployment.
type clusterMeasure struct {
	impl string
	dep  int
}

func (m clusterMeasure) d(l *clusterLab) deployment { return l.deps[m.dep] }

// clusterOrder lists every implementation on every deployment for one run:
// the implementations in an order rotated by run, each on the deployments
// in an order rotated by run and by the implementation's place, so that
// drift of the machine hits all alike.
func clusterOrder(impls []string, deps, run int) []clusterMeasure {
	var out []clusterMeasure
	for k := range impls {
		im := impls[(k+run)%len(impls)]
		for j := range deps {
			out = append(out, clusterMeasure{im, (j + k + run) % deps})
		}
	}
	return out
}

// idleRates measures each node's Redis CPU a second over d with no client
// but the harness's, keyed by address.
func idleRates(ctx context.Context, deps []deployment, d time.Duration) (map[string]float64, error) {
	c0 := make([][]float64, len(deps))
	for i, dep := range deps {
		var err error
		if c0[i], err = dep.cpu(ctx); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	time.Sleep(d)
	out := map[string]float64{}
	for i, dep := range deps {
		c1, err := dep.cpu(ctx)
		if err != nil {
			return nil, err
		}
		el := time.Since(t0).Seconds()
		for j, a := range dep.addrs {
			out[a] = (c1[j] - c0[i][j]) / el
		}
	}
	return out, nil
}

func withIdle(r clusterResult, run int, idle map[string]float64) clusterResult {
	r.Run = run
	for i := range r.Nodes {
		r.Nodes[i].Idle = idle[r.Nodes[i].Addr]
	}
	return r
}

// clusterCycleImpls are scenario 8's cycle variants.
var clusterCycleImpls = []string{"tenure", "baseline", "baseline+publish"}

// clusterLayout is tenure's key layout: the raw controls use a name's lease
// key too, so that every variant's cycle lands on the same node.
var clusterLayout = keys.Layout{Prefix: keys.DefaultPrefix}

// clusterLocker builds impl's locker on d.
func clusterLocker(d deployment, impl string) (locker, error) {
	switch impl {
	case "tenure":
		m, err := lease.New(d.client, lease.WithTTL(clusterTTL), lease.WithLogger(quietLogger))
		if err != nil {
			return nil, err
		}
		return tenureLocker{m}, nil
	case "baseline", "baseline+publish":
		return &rawLocker{c: d.client, publish: impl == "baseline+publish"}, nil
	}
	return nil, fmt.Errorf("no cycle variant %q", impl)
}

// clusterCycle runs impl's uncontended cycle on d for cfg.clusterCycleDur
// and counts each cycle to the node that serves its name.
func clusterCycle(ctx context.Context, cfg runConfig, d deployment, impl string, seq *atomic.Int64) (clusterResult, error) {
	if err := d.flush(ctx); err != nil {
		return clusterResult{}, err
	}
	l, err := clusterLocker(d, impl)
	if err != nil {
		return clusterResult{}, err
	}
	defer l.close()
	name := func(s int64) string { return fmt.Sprint("cl-cycle-", s) }
	next := func(int) string { return name(seq.Add(1)) }
	// Warm up: the scripts loaded on every node, the pool open.
	if _, errs, _ := timedCycles(ctx, l, clusterCycleGoroutines, 0, 256, next); errs > 0 {
		return clusterResult{}, fmt.Errorf("%d errors warming up", errs)
	}
	s0 := seq.Load()
	cpu0, err := d.cpu(ctx)
	if err != nil {
		return clusterResult{}, err
	}
	_, errs, el := timedCycles(ctx, l, clusterCycleGoroutines, cfg.clusterCycleDur, 0, next)
	nodes, err := d.nodes(ctx, cpu0, make([]int64, len(d.admins)))
	if err != nil {
		return clusterResult{}, err
	}
	// Every name taken in the window was one cycle.
	for s := s0 + 1; s <= seq.Load(); s++ {
		i, err := d.nodeOf(ctx, name(s))
		if err != nil {
			return clusterResult{}, err
		}
		nodes[i].Ops++
	}
	r := clusterResult{Part: "cycle", Deploy: d.name, Impl: impl, Seconds: el, Nodes: nodes, Goroutines: clusterCycleGoroutines, Errors: errs}
	cfg.logf("  cluster cycle %-16s on %-7s %8.0f cycles/s %s", impl, d.name, float64(r.ops())/el, perNodeLog(r))
	if errs > 0 {
		return r, fmt.Errorf("%d errors", errs)
	}
	return r, nil
}

// releasePublish is compareAndDelete with the PUBLISH tenure's release.lua
// sends when it frees a name.
var releasePublish = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', KEYS[1] .. ':released', 'released') return 1 end return 0`)

// rawLocker is scenario 1's baseline on any client, on a name's tenure
// lease key; with publish, its release script also publishes.
type rawLocker struct {
	c       redis.UniversalClient
	publish bool
	seq     atomic.Uint64
}

func (b *rawLocker) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	key := clusterLayout.Lease(name)
	token := nextToken(&b.seq)
	ok, err := b.c.SetNX(ctx, key, token, clusterTTL).Result()
	if err == nil && !ok {
		err = errors.New("raw: name taken")
	}
	if err != nil {
		return nil, err
	}
	release := compareAndDelete
	if b.publish {
		release = releasePublish
	}
	return func(ctx context.Context) error {
		n, err := release.Run(ctx, b.c, []string{key}, token).Int()
		if err == nil && n != 1 {
			err = errors.New("raw: not held")
		}
		return err
	}, nil
}

func (b *rawLocker) close() error { return nil }

// perNodeLog is the progress line's per-node part.
func perNodeLog(r clusterResult) string {
	var b strings.Builder
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, " [%s %d ops, cpu %.3fs: %.0f/cpu-s]", n.Addr, n.Ops, n.CPU, float64(n.Ops)/n.CPU)
	}
	fmt.Fprintf(&b, " all: %.0f/cpu-s", r.perCPU())
	return b.String()
}

// heldLease is one lease of clusterHold, with the node serving it and the
// send time of its last renewal seen.
type heldLease struct {
	l    *lease.Lease
	node int
	last time.Time
}

// clusterHold acquires cfg.clusterLeases leases on d, holds them for
// cfg.clusterRounds renewal intervals, and counts each renewal seen in that
// window to the node that serves its name; perItem renews them one script
// call each.
func clusterHold(ctx context.Context, cfg runConfig, d deployment, perItem bool) (clusterResult, error) {
	if err := d.flush(ctx); err != nil {
		return clusterResult{}, err
	}
	runtime.GC()
	interval := clusterTTL / 3
	client, impl := d.client, "tenure"
	if perItem {
		client, impl = d.perItem, "tenure-per-item"
	}
	m, err := lease.New(client, lease.WithTTL(clusterTTL), lease.WithRenewInterval(interval), lease.WithLogger(quietLogger))
	if err != nil {
		return clusterResult{}, err
	}
	defer m.Close()
	r := clusterResult{Part: "hold", Deploy: d.name, Impl: impl, Leases: cfg.clusterLeases, TTL: clusterTTL, Interval: interval}
	t0 := time.Now()
	held, refused, err := acquireHeld(ctx, m, d, cfg.clusterLeases)
	if err != nil {
		return r, err
	}
	r.AcquireSec, r.Refused = time.Since(t0).Seconds(), refused
	if err := watchHeld(ctx, d, held, interval*time.Duration(cfg.clusterRounds), &r); err != nil {
		return r, err
	}
	for _, h := range held {
		if h.l != nil && h.l.Err() != nil {
			r.Lost++
		}
	}
	cfg.logf("  cluster hold  %-16s on %-7s n=%d: acquire %.1fs, %.0f renewals/s, late %v, lost %d, refused %d %s", impl, d.name, r.Leases, r.AcquireSec,
		float64(r.ops())/r.Seconds, r.Lateness.Round(time.Millisecond), r.Lost, r.Refused, perNodeLog(r))
	if err := m.Close(); err != nil {
		return r, err
	}
	return r, d.flush(ctx)
}

// clusterSent is when a lease's last renewal (or acquisition) was sent, as
// its deadline says.
func clusterSent(l *lease.Lease) time.Time {
	drift := time.Duration(float64(clusterTTL)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra
	return l.Deadline().Add(drift - clusterTTL)
}

// acquireHeld acquires n fresh names on m from 64 goroutines with
// TryAcquire; a name refused with ErrOverloaded is counted, not held.
func acquireHeld(ctx context.Context, m *lease.Manager, d deployment, n int) ([]heldLease, int, error) {
	held := make([]heldLease, n)
	var refused atomic.Int64
	err := parallel(n, acquirers, func(i int) error {
		name := fmt.Sprint("cl-hold-", i)
		node, err := d.nodeOf(ctx, name)
		if err != nil {
			return err
		}
		l, err := m.TryAcquire(ctx, name)
		switch {
		case errors.Is(err, lease.ErrOverloaded):
			refused.Add(1)
			return nil
		case err != nil:
			return err
		}
		held[i] = heldLease{l: l, node: node, last: clusterSent(l)}
		return nil
	})
	return held, int(refused.Load()), err
}

// watchHeld samples every held lease's last renewal every fifth of an
// interval for window, counting renewals per node and the worst lateness,
// and each node's CPU over the window, into r.
func watchHeld(ctx context.Context, d deployment, held []heldLease, window time.Duration, r *clusterResult) error {
	ops := make([]int64, len(d.admins))
	worst := -r.Interval
	sample := func(count bool) {
		for i := range held {
			h := &held[i]
			if h.l == nil {
				continue
			}
			if s := clusterSent(h.l); s.After(h.last) {
				if count {
					ops[h.node]++
					worst = max(worst, s.Sub(h.last)-r.Interval)
				}
				h.last = s
			}
		}
	}
	sample(false) // renewals made while the others were being acquired are not the window's
	cpu0, err := d.cpu(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	tick := time.NewTicker(r.Interval / 5)
	defer tick.Stop()
	for end := t0.Add(window); time.Now().Before(end); <-tick.C {
		sample(true)
	}
	sample(true)
	r.Seconds = time.Since(t0).Seconds()
	if r.Nodes, err = d.nodes(ctx, cpu0, ops); err != nil {
		return err
	}
	r.Lateness = worst
	if r.ops() == 0 {
		return errors.New("no renewal seen in the window")
	}
	return nil
}

// clusterFailures are the scenario's safety failures: a lease tenure lost.
func clusterFailures(rs []clusterResult) []string {
	var out []string
	for _, c := range rs {
		if c.Lost > 0 {
			out = append(out, fmt.Sprintf("scenario 8: tenure lost %d of %d leases (%s, run %d)", c.Lost, c.Leases, c.Deploy, c.Run))
		}
	}
	return out
}
