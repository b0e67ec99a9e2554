// Scenario 12, three servers without a Cluster (issue 32, target 3): is a
// Cluster node's higher cost per operation the Cluster's, or that of
// running three servers on the machine?
//
// Scenario 8 finds a Cluster node's Redis CPU per cycle 1.28–1.38× the
// single server's on the 2-core VM, for tenure and for raw commands alike,
// and a Cluster of one node (cluster mode without the split) 1.08×. This
// scenario takes cluster mode away and keeps the split: three independent
// servers (no cluster-enabled), the names spread over them by a hash as a
// Cluster spreads them by slot, one client and one locker per server, the
// 32 goroutines of scenario 1 shared by all. Beside it, one server with all
// the names. Redis CPU per cycle (INFO cpu of every server over the loop ÷
// all cycles) is compared within each run, for tenure and the raw baseline,
// in a rotating order.
//
// Run it with `go run . -three-servers` (writes threeservers.md to -out).
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// spreadLocker sends each name to one of its lockers by a hash of the
// name, as a Cluster client sends a key to the node that serves its slot.
type spreadLocker struct{ ls []locker }

func (s spreadLocker) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return s.ls[h.Sum32()%uint32(len(s.ls))].acquire(ctx, name)
}

func (s spreadLocker) close() error {
	for _, l := range s.ls {
		_ = l.close()
	}
	return nil
}

// threeServers is scenario 12's servers: one alone, and three that share
// the names.
type threeServers struct {
	single *redis.Client   // admin client of the single server
	three  []*redis.Client // admin clients of the three
	stop   []func() error
}

func startThreeServers() (*threeServers, error) {
	t := &threeServers{}
	for i := range 4 {
		srv, err := startLoopbackServer()
		if err != nil {
			t.close()
			return nil, err
		}
		t.stop = append(t.stop, srv.Stop)
		admin, _ := newClient(srv.Addr(), 1)
		t.stop = append([]func() error{admin.Close}, t.stop...)
		if i == 0 {
			t.single = admin
		} else {
			t.three = append(t.three, admin)
		}
	}
	return t, nil
}

func (t *threeServers) close() {
	for _, f := range t.stop {
		_ = f()
	}
}

// lockers builds im's locker on the single server and its spread locker on
// the three.
func (t *threeServers) lockers(im impl) (single, three locker, err error) {
	mk := func(admin *redis.Client, pool int) (locker, error) {
		c, _ := newClient(admin.Options().Addr, pool)
		t.stop = append([]func() error{c.Close}, t.stop...)
		return im.new(c, 10*time.Second)
	}
	if single, err = mk(t.single, 36); err != nil {
		return nil, nil, err
	}
	var ls []locker
	for _, a := range t.three {
		l, err := mk(a, 36)
		if err != nil {
			return nil, nil, err
		}
		ls = append(ls, l)
	}
	return single, spreadLocker{ls}, nil
}

func runThreeServers(ctx context.Context, cfg runConfig, outDir string, reps int, d time.Duration) error {
	t, err := startThreeServers()
	if err != nil {
		return err
	}
	defer t.close()
	impls := []impl{tenureImpl(), baselineImpl()}
	ls := make([][2]locker, len(impls)) // [single, three]
	for i, im := range impls {
		if ls[i][0], ls[i][1], err = t.lockers(im); err != nil {
			return err
		}
		defer ls[i][0].close()
		defer ls[i][1].close()
	}
	deps := [2][]*redis.Client{{t.single}, t.three}
	us := make([][2][]float64, len(impls))
	var seq atomic.Int64
	for run := range reps {
		for k := range 2 * len(impls) {
			j := (k + run) % (2 * len(impls))
			i, dep := j/2, j%2
			v, err := threeCycle(ctx, deps[dep], ls[i][dep], d, &seq)
			if err != nil {
				return fmt.Errorf("three servers %s: %w", impls[i].Name, err)
			}
			us[i][dep] = append(us[i][dep], v)
			cfg.logf("  three-servers run %d %-8s on %d server(s): %6.1f µs Redis CPU/cycle", run, impls[i].Name, len(deps[dep]), v)
		}
	}
	return os.WriteFile(filepath.Join(outDir, "threeservers.md"), []byte(threeServersReport(impls, us, reps, d)), 0o644)
}

// threeCycle measures l's Redis CPU µs per cycle over d, summed over the
// servers of admins.
func threeCycle(ctx context.Context, admins []*redis.Client, l locker, d time.Duration, seq *atomic.Int64) (float64, error) {
	_ = cycleLoop(ctx, l, 32, 0, 256, seq) // scripts loaded, pools warm
	cpu := func() (s float64) {
		for _, a := range admins {
			s += redisCPU(ctx, a)
		}
		return s
	}
	for _, a := range admins {
		if err := a.FlushAll(ctx).Err(); err != nil {
			return 0, err
		}
	}
	c0 := cpu()
	r := cycleLoop(ctx, l, 32, d, 0, seq)
	c1 := cpu()
	if r.Errors > 0 || r.Ops == 0 {
		return 0, fmt.Errorf("%d of %d cycles failed", r.Errors, r.Ops)
	}
	return (c1 - c0) * 1e6 / float64(r.Ops), nil
}

func threeServersReport(impls []impl, us [][2][]float64, reps int, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scenario 12: three servers without a Cluster\n\nGenerated by `go run . -three-servers` on %s UTC. Machine: %s; Go %s; Redis %s; load average %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), machine(), runtime.Version(), redisVersion(), loadAvg())
	fmt.Fprintf(&b, "Uncontended acquire + release of fresh names from 32 goroutines, %v a measurement, %d runs in a rotating order: on one server, and spread by a hash of the name over three independent servers (not cluster-enabled; one client and one locker per server). Redis CPU is INFO cpu of every server over the loop ÷ all cycles; the ratio is taken within each run (median, range).\n\n", d, reps)
	b.WriteString("| implementation | Redis CPU µs/cycle, one server (median) | three servers, all together (median) | three ÷ one (range) |\n|---|---:|---:|---:|\n")
	for i, im := range impls {
		med, lo, hi := ratioSummary(us[i][1], us[i][0])
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f× (%.2f–%.2f) |\n", im.Name, median(us[i][0]), median(us[i][1]), med, lo, hi)
	}
	return b.String()
}
