// Command bench compares tenure with its peers (redsync, redislock) and with
// the raw Redis commands any lease needs, on a redis-server it starts itself
// on a free loopback port. It writes results/results.md, results.json and PNG
// plots.
//
//	go run .          # the full run, for published numbers
//	go run . -short   # the smoke run for CI: exits 1 if a safety property fails
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// runConfig is what one mode runs.
type runConfig struct {
	mode       string
	runs       int
	cycleDur   time.Duration
	contendDur time.Duration
	lossTTLs   []lossCase
	holds      []holdCase
	million    millionCase
	floorDur   time.Duration
	// Scenario 7: each cycle measurement, each handoff run (at each count
	// of goroutines) and the read-write mix.
	semCycleDur, semHandoffDur, semMixDur time.Duration
	semGoroutines                         []int
	// Scenario 8: runs, the cycle's window, the leases held, the renewal
	// rounds watched, each run's idle measurement, whether the leases are
	// also held with renewals one call per lease (tenure-per-item), and
	// whether a Cluster of one node runs too (cluster-1).
	clusterRuns, clusterLeases, clusterRounds int
	clusterCycleDur, clusterIdle              time.Duration
	clusterPerItem, clusterOne                bool
	verbose                                   bool
	// contendedOnly, when not empty, names the implementations scenario 2
	// runs (-contended-impls); the others are skipped.
	contendedOnly map[string]bool
}

func (c runConfig) logf(format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func configFor(mode string) runConfig {
	switch mode {
	case "short":
		return runConfig{mode: mode, runs: 1, cycleDur: 300 * time.Millisecond, contendDur: time.Second,
			lossTTLs: []lossCase{{300 * time.Millisecond, 12}},
			holds: []holdCase{
				{1_000, 3 * time.Second, time.Second, 3 * time.Second},
				{10_000, 3 * time.Second, time.Second, 3 * time.Second},
			},
			million: millionCase{20_000, 10 * time.Second}, floorDur: 300 * time.Millisecond,
			semCycleDur: 150 * time.Millisecond, semHandoffDur: 500 * time.Millisecond, semMixDur: 300 * time.Millisecond, semGoroutines: []int{8},
			clusterRuns: 1, clusterLeases: 3_000, clusterRounds: 1, clusterCycleDur: 300 * time.Millisecond, clusterIdle: 300 * time.Millisecond}
	case "medium":
		return runConfig{mode: mode, runs: 3, cycleDur: time.Second, contendDur: 2 * time.Second,
			lossTTLs: []lossCase{{300 * time.Millisecond, 40}, {time.Second, 15}},
			holds: []holdCase{
				{1_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{10_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{100_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{10_000, 3 * time.Second, time.Second, 5 * time.Second},
				{100_000, 3 * time.Second, time.Second, 5 * time.Second},
			},
			million: millionCase{200_000, 40 * time.Second}, floorDur: time.Second,
			semCycleDur: time.Second, semHandoffDur: 2 * time.Second, semMixDur: time.Second, semGoroutines: []int{8, 32},
			clusterRuns: 3, clusterLeases: 30_000, clusterRounds: 2, clusterCycleDur: time.Second, clusterIdle: time.Second, clusterPerItem: true, clusterOne: true}
	default:
		return runConfig{mode: "full", runs: 5, cycleDur: 2 * time.Second, contendDur: 3 * time.Second,
			lossTTLs: []lossCase{{300 * time.Millisecond, 100}, {time.Second, 30}},
			holds: []holdCase{
				{1_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{10_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{100_000, 30 * time.Second, 10 * time.Second, 30 * time.Second},
				{1_000, 3 * time.Second, time.Second, 5 * time.Second},
				{10_000, 3 * time.Second, time.Second, 5 * time.Second},
				{100_000, 3 * time.Second, time.Second, 5 * time.Second},
			},
			million: millionCase{1_000_000, 2 * time.Minute}, floorDur: 3 * time.Second,
			semCycleDur: 2 * time.Second, semHandoffDur: 3 * time.Second, semMixDur: 2 * time.Second, semGoroutines: []int{8, 32},
			clusterRuns: 3, clusterLeases: 30_000, clusterRounds: 3, clusterCycleDur: 2 * time.Second, clusterIdle: time.Second, clusterPerItem: true, clusterOne: true}
	}
}

func main() {
	short := flag.Bool("short", false, "smoke run (under 2 minutes) for CI")
	medium := flag.Bool("medium", false, "between -short and the full run")
	out := flag.String("out", "results", "directory for results.md, results.json and the plots")
	only := flag.String("only", allScenarios(), "comma-separated scenarios to run; the others are kept from the previous results.json in -out")
	quiet := flag.Bool("q", false, "no progress on stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	millionN := flag.Int("million-n", 0, "scenario 5's lease count (default: the mode's: 20,000, 200,000 or 1,000,000)")
	millionTTLFlag := flag.Duration("million-ttl", 30*time.Second, "scenario 5's TTL; leases renew every third of it")
	contendedOnly := flag.String("contended-impls", "", "scenario 2: run only these implementations (comma-separated names, as in its table: tenure,redislock-1ms, ...); all when empty")
	replot := flag.Bool("replot", false, "run nothing: rewrite results.md and the plots from -out's results.json")
	alone := aloneFlags()
	flag.Parse()
	if alone.chosen() {
		alone.run(*out, *quiet)
		return
	}
	if *replot {
		if err := rewrite(*out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	mode := "full"
	if *short {
		mode = "short"
	} else if *medium {
		mode = "medium"
	}
	cfg := configFor(mode)
	cfg.verbose = !*quiet
	if *contendedOnly != "" {
		cfg.contendedOnly = map[string]bool{}
		for _, name := range strings.Split(*contendedOnly, ",") {
			if !isContendedImpl(name) {
				fmt.Fprintf(os.Stderr, "bench: -contended-impls: no implementation %q in scenario 2\n", name)
				os.Exit(2)
			}
			cfg.contendedOnly[name] = true
		}
	}
	if *millionN > 0 {
		cfg.million.Leases = *millionN
	}
	if *millionTTLFlag < 3*time.Second {
		fmt.Fprintln(os.Stderr, "bench: -million-ttl must be at least 3s")
		os.Exit(2)
	}
	setMillionTTL(*millionTTLFlag)
	if err := run(cfg, *out, *only); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// alone is the flags of scenarios 9 to 13, which run by themselves
// (not through -only) and write their own report to -out.
type alone struct {
	layout, scale, renewFloor, threeServers bool
	native                                  bool
	layoutReps                              int
	layoutD                                 time.Duration
	renewFloorN, nativeN                    int
	scaleRenew                              string
	sc                                      scaleConfig
}

func aloneFlags() *alone {
	a := &alone{}
	flag.BoolVar(&a.layout, "layout", false, "run scenario 9 alone (layout.go) and write layout.md to -out")
	flag.IntVar(&a.layoutReps, "layout-reps", 3, "scenario 9's runs")
	flag.DurationVar(&a.layoutD, "layout-d", 3*time.Second, "scenario 9's time a measurement")
	flag.BoolVar(&a.renewFloor, "renew-floor", false, "run scenario 11 alone (renewfloor.go) and write renewfloor.md to -out; -layout-reps and -layout-d set its runs and time a measurement")
	flag.IntVar(&a.renewFloorN, "renew-floor-n", 30000, "scenario 11's lease count")
	flag.BoolVar(&a.threeServers, "three-servers", false, "run scenario 12 alone (threeservers.go) and write threeservers.md to -out; -layout-reps and -layout-d set its runs and time a measurement")
	flag.BoolVar(&a.native, "native", false, "run scenario 13 alone (native.go: SET … IFEQ, DELIFEQ and DELEX against tenure's scripts) and write native.md to -out; -layout-reps and -layout-d set its runs and time a measurement")
	flag.IntVar(&a.nativeN, "native-n", 30000, "scenario 13's lease count for the renewals")
	flag.BoolVar(&a.scale, "scale", false, "run scenario 10 alone (scale.go; for a machine where Redis has cores of its own) and write scale.md to -out")
	flag.StringVar(&a.scaleRenew, "scale-renew", "300000", "scenario 10: lease counts of the renewal-cost part, comma-separated (0 skips it)")
	flag.IntVar(&a.sc.clusterLeases, "scale-cluster", 3_000_000, "scenario 10: leases of the Cluster part (0 skips it)")
	flag.IntVar(&a.sc.managers, "scale-managers", 6, "scenario 10: managers sharing the Cluster part's leases")
	flag.IntVar(&a.sc.rounds, "scale-rounds", 3, "scenario 10: renewal rounds watched (before and after the kill)")
	flag.DurationVar(&a.sc.retryFor, "scale-retry", 0, "scenario 10: how long the Cluster part tries a refused acquisition again (0: never)")
	flag.BoolVar(&a.sc.pin, "scale-pin", false, "scenario 10: pin each redis-server to a core of its own with taskset (cores 0, 1, ...)")
	flag.DurationVar(&scaleTTL, "scale-ttl", scaleTTL, "scenario 10: the TTL of every lease, renewed every third of it")
	return a
}

func (a *alone) chosen() bool {
	return a.layout || a.scale || a.renewFloor || a.threeServers || a.native
}

// run runs the chosen scenario and exits on failure.
func (a *alone) run(out string, quiet bool) {
	cfg := configFor("full")
	cfg.verbose = !quiet
	if scaleTTL < 3*time.Millisecond {
		fmt.Fprintf(os.Stderr, "bench: -scale-ttl %v: want at least 3ms (renewed every third of it)\n", scaleTTL)
		os.Exit(2)
	}
	for _, f := range strings.Split(a.scaleRenew, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "bench: -scale-renew: %q is not a lease count\n", f)
			os.Exit(2)
		}
		if n > 0 {
			a.sc.renewLeases = append(a.sc.renewLeases, n)
		}
	}
	// -out DIR is made before the measuring, as a full run makes it
	// (writeResults): a scenario that ran for minutes then failed to
	// write its report for want of DIR.
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	var err error
	switch {
	case a.layout:
		err = runLayout(context.Background(), cfg, out, a.layoutReps, a.layoutD)
	case a.renewFloor:
		err = runRenewFloor(context.Background(), cfg, out, a.renewFloorN, a.layoutReps, a.layoutD)
	case a.threeServers:
		err = runThreeServers(context.Background(), cfg, out, a.layoutReps, a.layoutD)
	case a.native:
		err = runNative(context.Background(), cfg, out, a.nativeN, a.layoutReps, a.layoutD)
	default:
		err = runScale(context.Background(), cfg, a.sc, out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// A scenario is what the driver knows of one: its name for -only, its
// progress line, how to run it into res (its safety failures included), and
// how to take its results from an earlier run that -only keeps.
type scenario struct {
	name, title string
	run         func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) error
	keep        func(res, prev *results)
}

// scenarios are run, and reported, in this order. Each gets the shared
// redis-server; floor and cluster start servers of their own.
var scenarios = []scenario{
	{"cycle", "scenario 1: uncontended cycle", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		res.Cycle, err = runCycles(ctx, cfg, srv.Addr())
		return err
	}, func(res, prev *results) { res.Cycle = prev.Cycle }},
	{"contended", "scenario 2: contended handoff", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		res.Contended, err = runContended(ctx, cfg, srv.Addr())
		return err
	}, func(res, prev *results) { res.Contended = prev.Contended }},
	{"hold", "scenario 3: watchdog at scale", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		if res.Hold, err = runHold(ctx, cfg, srv); err == nil {
			res.Failures = append(res.Failures, holdFailures(res.Hold)...)
		}
		return err
	}, func(res, prev *results) { res.Hold = prev.Hold }},
	{"loss", "scenario 4: loss detection", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		if res.Loss, err = runLoss(ctx, cfg, srv.Addr()); err == nil {
			res.Failures = append(res.Failures, lossFailures(res.Loss)...)
		}
		return err
	}, func(res, prev *results) { res.Loss = prev.Loss }},
	{"million", "scenario 5: a million leases", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		if res.Million, err = runMillion(ctx, cfg, srv); err == nil {
			res.Failures = append(res.Failures, millionFailures(res.Million)...)
		}
		return err
	}, func(res, prev *results) { res.Million = prev.Million }},
	{"floor", "scenario 6: where the floor is", func(ctx context.Context, cfg runConfig, _ *redistest.Server, res *results) (err error) {
		res.Floor, err = runFloor(ctx, cfg)
		return err
	}, func(res, prev *results) { res.Floor = prev.Floor }},
	{"semaphore", "scenario 7: semaphores and read-write locks", func(ctx context.Context, cfg runConfig, srv *redistest.Server, res *results) (err error) {
		if res.Semaphore, err = runSemaphore(ctx, cfg, srv.Addr()); err == nil {
			res.Failures = append(res.Failures, semaphoreFailures(res.Semaphore)...)
		}
		return err
	}, func(res, prev *results) { res.Semaphore = prev.Semaphore }},
	{"cluster", "scenario 8: a 3-primary Cluster beside a single server", func(ctx context.Context, cfg runConfig, _ *redistest.Server, res *results) (err error) {
		if res.Cluster, err = runCluster(ctx, cfg); err == nil {
			res.Failures = append(res.Failures, clusterFailures(res.Cluster)...)
		}
		return err
	}, func(res, prev *results) { res.Cluster = prev.Cluster }},
}

// allScenarios is every scenario's name, in order, as -only takes them.
func allScenarios() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}

func run(cfg runConfig, outDir, only string) error {
	start := time.Now()
	srv, err := startLoopbackServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	addr := srv.Addr()
	res := newResults(cfg, start)
	want := func(s string) bool { return strings.Contains(","+only+",", ","+s+",") }
	cfg.logf("bench: %s mode, redis-server %s on %s", cfg.mode, res.Redis, addr)
	for _, s := range scenarios {
		if want(s.name) {
			cfg.logf("%s", s.title)
			if err := s.run(context.Background(), cfg, srv, res); err != nil {
				return err
			}
		}
	}
	if only != allScenarios() {
		mergePrevious(res, filepath.Join(outDir, "results.json"), want)
	}
	res.Elapsed = time.Since(start).Round(time.Second)
	res.LoadEnd = loadAvg()
	if err := writeResults(res, outDir); err != nil {
		return err
	}
	cfg.logf("bench: done in %v; wrote %s", res.Elapsed, outDir)
	if len(res.Failures) > 0 {
		return fmt.Errorf("safety property failed:\n  %s", strings.Join(res.Failures, "\n  "))
	}
	return nil
}

// writeReport writes a scenario's report, file, into outDir, which it
// makes if it is missing.
func writeReport(outDir, file, report string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, file), []byte(report), 0o644)
}

// writeResults writes results.json, the plots and results.md.
func writeResults(res *results, outDir string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(outDir, "results.json"), js, 0o644); err != nil {
		return err
	}
	if err := writePlots(res, outDir); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(outDir, "results.md"), []byte(markdown(res)), 0o644)
}

// mergePrevious fills the scenarios this run skipped from an earlier
// results.json, keeping the date each was taken.
func mergePrevious(res *results, file string, ran func(string) bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	var prev results
	if json.Unmarshal(b, &prev) != nil {
		return
	}
	res.Dates = map[string]time.Time{}
	for _, s := range scenarios {
		when := res.Date
		if !ran(s.name) {
			when = prev.Date
			if d, ok := prev.Dates[s.name]; ok {
				when = d
			}
			s.keep(res, &prev)
		}
		res.Dates[s.name] = when
	}
}

// rewrite renders results.md and the plots again from results.json.
func rewrite(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	if err := writePlots(&res, dir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(&res)), 0o644)
}
