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
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/redistest"
)

type lossCase struct {
	ttl    time.Duration
	trials int
}

type holdCase struct {
	Leases   int
	TTL      time.Duration
	Interval time.Duration
	Hold     time.Duration
}

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

// results is everything one run measured; results.json holds it.
type results struct {
	Mode      string
	Date      time.Time
	Machine   string
	Go        string
	Redis     string
	Runs      int
	Cycle     []cycleResult
	Contended []contendedResult
	Hold      []holdResult
	Loss      []lossResult
	Million   []millionResult
	Floor     []floorResult
	Semaphore *semaphoreResults `json:",omitempty"`
	Cluster   []clusterResult   `json:",omitempty"`
	Impls     map[string]string
	Elapsed   time.Duration
	LoadStart string // /proc/loadavg when the run began and ended: other work on the machine
	LoadEnd   string
	Failures  []string
	// Dates says when each scenario's numbers were taken, when a run with
	// -only kept some from an earlier run.
	Dates map[string]time.Time `json:",omitempty"`
}

func main() {
	short := flag.Bool("short", false, "smoke run (under 2 minutes) for CI")
	medium := flag.Bool("medium", false, "between -short and the full run")
	out := flag.String("out", "results", "directory for results.md, results.json and the plots")
	only := flag.String("only", allScenarios, "comma-separated scenarios to run; the others are kept from the previous results.json in -out")
	quiet := flag.Bool("q", false, "no progress on stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	millionN := flag.Int("million-n", 0, "scenario 5's lease count (default: the mode's: 20,000, 200,000 or 1,000,000)")
	millionTTLFlag := flag.Duration("million-ttl", 30*time.Second, "scenario 5's TTL; leases renew every third of it")
	replot := flag.Bool("replot", false, "run nothing: rewrite results.md and the plots from -out's results.json")
	layout := flag.Bool("layout", false, "run scenario 9 alone (layout.go) and write layout.md to -out")
	layoutReps := flag.Int("layout-reps", 3, "scenario 9's runs")
	layoutD := flag.Duration("layout-d", 3*time.Second, "scenario 9's time a measurement")
	var sc scaleConfig
	scale := flag.Bool("scale", false, "run scenario 10 alone (scale.go; for a machine where Redis has cores of its own) and write scale.md to -out")
	flag.IntVar(&sc.renewLeases, "scale-renew", 300_000, "scenario 10: leases of the renewal-cost part (0 skips it)")
	flag.IntVar(&sc.clusterLeases, "scale-cluster", 3_000_000, "scenario 10: leases of the Cluster part (0 skips it)")
	flag.IntVar(&sc.managers, "scale-managers", 6, "scenario 10: managers sharing the Cluster part's leases")
	flag.IntVar(&sc.rounds, "scale-rounds", 3, "scenario 10: renewal rounds watched (before and after the kill)")
	flag.BoolVar(&sc.pin, "scale-pin", false, "scenario 10: pin each redis-server to a core of its own with taskset (cores 0, 1, ...)")
	flag.Parse()
	if *layout || *scale {
		cfg := configFor("full")
		cfg.verbose = !*quiet
		var err error
		if *layout {
			err = runLayout(context.Background(), cfg, *out, *layoutReps, *layoutD)
		} else {
			err = runScale(context.Background(), cfg, sc, *out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
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

func run(cfg runConfig, outDir, only string) error {
	start := time.Now()
	srv, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	addr := srv.Addr()
	if !strings.HasPrefix(addr, "127.") {
		return fmt.Errorf("refusing to benchmark a non-loopback server %s", addr)
	}
	res := &results{Mode: cfg.mode, Date: start.UTC(), Machine: machine(), Go: runtime.Version(), Redis: redisVersion(), Runs: cfg.runs, Impls: map[string]string{}, LoadStart: loadAvg()}
	for _, im := range append(contendedImpls(), redislockImpl(0), refreshImpl()) {
		res.Impls[im.Name] = im.Note
	}
	ctx := context.Background()
	want := func(s string) bool { return strings.Contains(","+only+",", ","+s+",") }
	cfg.logf("bench: %s mode, redis-server %s on %s", cfg.mode, res.Redis, addr)
	if want("cycle") {
		cfg.logf("scenario 1: uncontended cycle")
		if res.Cycle, err = runCycles(ctx, cfg, addr); err != nil {
			return err
		}
	}
	if want("contended") {
		cfg.logf("scenario 2: contended handoff")
		if res.Contended, err = runContended(ctx, cfg, addr); err != nil {
			return err
		}
	}
	if want("hold") {
		cfg.logf("scenario 3: watchdog at scale")
		if res.Hold, err = runHold(ctx, cfg, srv); err != nil {
			return err
		}
		for _, h := range res.Hold {
			if h.Lost > 0 && h.Impl == "tenure" {
				res.Failures = append(res.Failures, fmt.Sprintf("scenario 3: tenure lost %d of %d leases (ttl %v)", h.Lost, h.Leases, h.TTL))
			}
		}
	}
	if want("loss") {
		cfg.logf("scenario 4: loss detection")
		if res.Loss, err = runLoss(ctx, cfg, addr); err != nil {
			return err
		}
		for _, l := range res.Loss {
			if l.Negative > 0 {
				res.Failures = append(res.Failures, fmt.Sprintf("scenario 4: %d of %d trials cancelled after the server's expiry (ttl %v, min margin %v)", l.Negative, l.Trials, l.TTL, l.Min))
			}
		}
	}
	if want("million") {
		cfg.logf("scenario 5: a million leases")
		if res.Million, err = runMillion(ctx, cfg, srv); err != nil {
			return err
		}
		for _, m := range res.Million {
			if m.Error != "" {
				res.Failures = append(res.Failures, fmt.Sprintf("scenario 5: stopped at %d of %d leases: %s", m.Leases, m.Target, m.Error))
			}
			if m.Lost > 0 {
				res.Failures = append(res.Failures, fmt.Sprintf("scenario 5: tenure lost %d of %d leases", m.Lost, m.Leases))
			}
		}
	}
	if want("floor") {
		cfg.logf("scenario 6: where the floor is")
		if res.Floor, err = runFloor(ctx, cfg); err != nil {
			return err
		}
	}
	if want("semaphore") {
		cfg.logf("scenario 7: semaphores and read-write locks")
		if res.Semaphore, err = runSemaphore(ctx, cfg, addr); err != nil {
			return err
		}
		res.Failures = append(res.Failures, semaphoreFailures(res.Semaphore)...)
	}
	if want("cluster") {
		cfg.logf("scenario 8: a 3-primary Cluster beside a single server")
		if res.Cluster, err = runCluster(ctx, cfg); err != nil {
			return err
		}
		for _, c := range res.Cluster {
			if c.Lost > 0 {
				res.Failures = append(res.Failures, fmt.Sprintf("scenario 8: tenure lost %d of %d leases (%s, run %d)", c.Lost, c.Leases, c.Deploy, c.Run))
			}
		}
	}
	if only != allScenarios {
		mergePrevious(res, filepath.Join(outDir, "results.json"), want)
	}
	res.Elapsed = time.Since(start).Round(time.Second)
	res.LoadEnd = loadAvg()
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
	if err := os.WriteFile(filepath.Join(outDir, "results.md"), []byte(markdown(res)), 0o644); err != nil {
		return err
	}
	cfg.logf("bench: done in %v; wrote %s", res.Elapsed, outDir)
	if len(res.Failures) > 0 {
		return fmt.Errorf("safety property failed:\n  %s", strings.Join(res.Failures, "\n  "))
	}
	return nil
}

// machine describes the CPU: "N × model".
func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	model := "unknown CPU"
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			model = strings.TrimSpace(v)
			break
		}
	}
	return fmt.Sprintf("%d × %s (%s/%s)", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

func redisVersion() string {
	bin, err := redistest.Binary()
	if err != nil {
		return "unknown"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

const allScenarios = "cycle,contended,hold,loss,million,floor,semaphore,cluster"

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
	for _, s := range strings.Split(allScenarios, ",") {
		when := res.Date
		if !ran(s) {
			when = prev.Date
			if d, ok := prev.Dates[s]; ok {
				when = d
			}
			switch s {
			case "cycle":
				res.Cycle = prev.Cycle
			case "contended":
				res.Contended = prev.Contended
			case "hold":
				res.Hold = prev.Hold
			case "loss":
				res.Loss = prev.Loss
			case "million":
				res.Million = prev.Million
			case "floor":
				res.Floor = prev.Floor
			case "semaphore":
				res.Semaphore = prev.Semaphore
			case "cluster":
				res.Cluster = prev.Cluster
			}
		}
		res.Dates[s] = when
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
