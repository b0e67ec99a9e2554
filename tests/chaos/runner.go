//go:build chaos

package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
	"github.com/tenure-go/tenure/watchdog"
)

var (
	flagDuration = flag.Duration("chaos.duration", 60*time.Second, "how long the chaos run contends and injects faults")
	flagSeed     = flag.Uint64("chaos.seed", 0, "seed of the fault schedule and the workers' choices (0: from the clock; the run prints it)")
	flagLossy    = flag.Float64("chaos.lossy", 0, "fraction of kill-and-restart faults that lose the server's data (0: every restart keeps it, from the AOF with appendfsync always)")
	flagManagers = flag.Int("chaos.managers", 4, "managers, each with its own client behind its own proxy")
	flagWorkers  = flag.Int("chaos.workers", 6, "contending goroutines per manager (every third uses Do)")
	flagNames    = flag.Int("chaos.names", 3, "names contended for as leases")
	flagKinds    = flag.String("chaos.kinds", allKinds, "kinds of lock contended for: lease (the -chaos.names names), permit (one semaphore of semN permits), rw (one read-write lock), "+
		"set (workers also take two or three of the lease names at once: lease.Manager.AcquireAll)")
	flagTTL     = flag.Duration("chaos.ttl", time.Second, "lease TTL")
	flagFaults  = flag.String("chaos.faults", allFaults, "fault kinds to inject")
	flagLinWait = flag.Duration("chaos.lintimeout", 60*time.Second, "how long porcupine may search before the linearizability check reports unknown")
)

const allFaults = "pause,restart,oldrdb,everysec,promote,latency,blackhole,reset,gcstall"

const allKinds = "lease,permit,rw,set"

// semN is the number of permits of the semaphore contended for.
const semN = 2

// Config is one run's settings: the flags for TestChaos, fixed ones for the
// tests of the checker against a broken lease.
type Config struct {
	duration, ttl           time.Duration
	seed                    uint64
	lossy                   float64
	managers, workers, nams int
	faults, kinds           string
	linTimeout              time.Duration
	resource                Resource // nil: an in-memory Store
}

// WithResource returns c with the holders writing to res instead of the
// in-memory Store: a real fenced resource, which refuses stale writes
// itself, and whose refusals the checker then judges too.
func (c Config) WithResource(res Resource) Config {
	c.resource = res
	return c
}

// A Resource is a real fenced resource the holders of a run write their
// fences to (package fencing's test drives its PostgreSQL guard through
// one).
type Resource interface {
	// Write writes fence to name's resource on behalf of a holder that
	// believes it holds name, whether or not it still does (a stalled
	// holder writes after its lease is gone, as a paused process that has
	// not heard of its loss would). It returns the resource's order of the
	// write when the resource took it (increasing, in the order writes to
	// one name took effect), and ErrRefused when it refused it as stale;
	// any other error when the outcome is unknown.
	Write(ctx context.Context, name string, fence int64) (seq int64, err error)
}

// ErrRefused is a Resource's answer to a write it refused as stale.
var ErrRefused = errors.New("chaos: the resource refused a stale write")

// FlagConfig is the run the -chaos.* flags describe.
func FlagConfig() Config {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return Config{duration: *flagDuration, ttl: *flagTTL, seed: seed, lossy: *flagLossy, managers: *flagManagers,
		workers: *flagWorkers, nams: *flagNames, faults: *flagFaults, kinds: *flagKinds, linTimeout: *flagLinWait}
}

// Outcome is what a run found.
type Outcome struct {
	Report   *Report
	History  History
	Summary  string
	Acquired int64
}

// run is one chaos run's shared state.
type run struct {
	t       *testing.T
	cfg     Config
	ctx     context.Context // ends when the run's time is up
	ttl     time.Duration
	srv     *redistest.Server // the primary every client reaches; swapped by promote
	proxies []*redistest.Proxy
	rec     Recorder
	store   *Store
	names   []string        // every name contended for
	kinds   map[string]Kind // each name's kind: KindLease, KindPermit, or KindRead for a read-write lock
	faults  map[string]bool
	obs     *observer
	tracer  *tracer

	// For promote: a replica of srv, fed through link, which a black hole
	// makes lag before it is promoted.
	standby *redistest.Server
	link    *redistest.Proxy

	exact []bool // manager i's client does not retry commands
	// GC-like stalls waiting for a holder to take them: of a single name,
	// and (kind set) of a set of names.
	stallsPending, setStallsPending atomic.Int64

	attempts, acquired, acquireTimeouts, acquireErrors atomic.Int64
	releases, releaseNotHeld, releaseErrors            atomic.Int64
	notHeldAmbiguous                                   atomic.Int64
	doCalls, doLost, doErrors                          atomic.Int64
	sets                                               bool // kind set: workers also take several names at once
	setCalls, setLost                                  atomic.Int64
	// grantedAt is when each lease's own Acquire returned (*lease.Lease
	// -> time.Time): a set's member is granted before the set is whole.
	grantedAt sync.Map
	firstErrs sync.Map // error text prefix -> count (*atomic.Int64)
}

// write records a write of s's fence to its name's resource: to the
// in-memory Store, which takes them all, or to the run's real Resource,
// whose answer is recorded with it.
func (r *run) write(s Section, stalled bool) {
	if r.cfg.resource == nil {
		r.store.Write(s.ID, s.Name, s.Fence, stalled)
		return
	}
	at := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	seq, err := r.cfg.resource.Write(ctx, s.Name, s.Fence)
	cancel()
	w := Write{Seq: seq, Section: s.ID, Name: s.Name, Fence: s.Fence, At: at, Stalled: stalled}
	switch {
	case errors.Is(err, ErrRefused):
		w.Refused = true
	case err != nil:
		r.noteErr("resource write", err)
		return // unknown: neither taken nor refused as far as anyone knows
	}
	r.store.Record(w)
}

func (r *run) noteErr(what string, err error) {
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	v, _ := r.firstErrs.LoadOrStore(what+": "+msg, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// Run runs one chaos run and checks its history; the caller decides what
// the report must say.
func Run(t *testing.T, cfg Config) Outcome {
	t.Logf("chaos: seed %d, duration %v, ttl %v, lossy restarts %.2f, %d managers x %d workers on %d lease names and kinds %s, faults %s; rerun with -chaos.seed=%d",
		cfg.seed, cfg.duration, cfg.ttl, cfg.lossy, cfg.managers, cfg.workers, cfg.nams, cfg.kinds, cfg.faults, cfg.seed)
	r := &run{t: t, cfg: cfg, ttl: cfg.ttl, store: NewStore(), faults: map[string]bool{}, tracer: newTracer()}
	r.parseFaults()
	r.parseKinds()
	r.srv = redistest.Start(t, redistest.Config{AOF: true})
	if r.faults["promote"] {
		r.standby = redistest.Start(t, redistest.Config{AOF: true})
		if err := r.attachStandby(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.link.Close() })
	}
	redis.SetLogger(discardLogger{}) // go-redis's own complaints about dials while the server is down
	managers := r.startManagers()

	r.obs = newObserver(r.srv, r.names, r.kinds)
	obsDone := make(chan struct{})
	obsCtx, stopObs := context.WithCancel(context.Background())
	go func() { defer close(obsDone); r.obs.run(obsCtx) }()
	began := time.Now()
	r.contend(managers)
	stopObs()
	<-obsDone
	elapsed := time.Since(began)

	h := r.rec.History(r.store, r.obs.sightings())
	h.Guarded = r.cfg.resource != nil
	rep := Check(h)
	rep.Linearizability = CheckLinearizable(h, cfg.linTimeout)
	summary := r.summary(h, rep, len(managers), elapsed)
	t.Logf("chaos summary:\n%s", summary)
	if out := os.Getenv("CHAOS_SUMMARY"); out != "" {
		_ = os.WriteFile(out, []byte(summary), 0o644)
	}
	return Outcome{Report: rep, History: h, Summary: summary, Acquired: r.acquired.Load()}
}

// parseFaults reads cfg.faults into r.faults.
func (r *run) parseFaults() {
	for _, k := range strings.Split(r.cfg.faults, ",") {
		k = strings.TrimSpace(k)
		if k != "" && !slices.Contains(strings.Split(allFaults, ","), k) {
			r.t.Fatalf("unknown fault %q: the kinds are %s", k, allFaults)
		}
		r.faults[k] = true
	}
}

// parseKinds reads cfg.kinds into the names contended for and their kinds.
func (r *run) parseKinds() {
	r.kinds = map[string]Kind{}
	for _, k := range strings.Split(r.cfg.kinds, ",") {
		switch strings.TrimSpace(k) {
		case "lease":
			for i := range r.cfg.nams {
				r.kinds[fmt.Sprintf("res%d", i)] = KindLease
			}
		case "permit":
			r.kinds["sem0"] = KindPermit
		case "rw":
			r.kinds["rw0"] = KindRead
		case "set":
			r.sets = true
		case "":
		default:
			r.t.Fatalf("unknown kind %q: the kinds are %s", k, allKinds)
		}
	}
	r.names = slices.Sorted(maps.Keys(r.kinds))
	if r.sets && (!strings.Contains(r.cfg.kinds, "lease") || r.cfg.nams < 2) {
		r.t.Fatal("kind set takes several lease names: it needs kind lease and -chaos.names 2 or more")
	}
	if len(r.names) == 0 {
		r.t.Fatal("no names to contend for")
	}
}

// startManagers starts one manager per cfg.managers, each with a client of
// its own behind a proxy of its own.
func (r *run) startManagers() []*lease.Manager {
	quiet := slog.New(slog.DiscardHandler)
	managers := make([]*lease.Manager, r.cfg.managers)
	r.exact = make([]bool, len(managers))
	for i := range managers {
		p := redistest.StartProxy(r.t, r.srv.Addr())
		r.proxies = append(r.proxies, p)
		opts := &redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, DialTimeout: time.Second}
		if i%2 == 0 {
			// No retries: a Release that answers "not held" is then exact.
			// With go-redis's default retries, a release script applied
			// just before a connection reset is sent again and finds its
			// own deletion: "not held" although it held.
			opts.MaxRetries = -1
			r.exact[i] = true
		}
		if i == len(managers)-1 && i > 0 {
			// One client that ignores contexts: the manager bounds its
			// calls itself, and its watchdog by local deadlines.
			opts.ContextTimeoutEnabled = false
			opts.ReadTimeout = 2 * r.ttl
			opts.WriteTimeout = 2 * r.ttl
		}
		c := redis.NewClient(opts)
		c.AddHook(r.tracer.hook(i))
		r.t.Cleanup(func() { _ = c.Close() })
		m, err := lease.New(c, lease.WithTTL(r.ttl), lease.WithLogger(quiet), lease.WithOpTimeout(r.ttl/2), lease.WithHooks(r.hooks()))
		if err != nil {
			r.t.Fatal(err)
		}
		managers[i] = m
	}
	return managers
}

// contend runs the faults and the workers for cfg.duration, then undoes
// the faults and closes the managers while holders still hold (their
// sections end "closed").
func (r *run) contend(managers []*lease.Manager) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.duration)
	defer cancel()
	r.ctx = ctx
	seed := r.cfg.seed
	var faultsWG, workersWG sync.WaitGroup
	faultsWG.Go(func() { r.heartbeat(watchdog.DefaultSlack(r.cfg.ttl)) })
	faultsWG.Go(func() { r.serverFaults(rand.New(rand.NewPCG(seed, 1))) })
	for k := range 2 {
		faultsWG.Go(func() { r.clientFaults(rand.New(rand.NewPCG(seed, uint64(2+k)))) })
	}
	for mi, m := range managers {
		for g := range r.cfg.workers {
			rng := rand.New(rand.NewPCG(seed, uint64(100+mi*1000+g)))
			holder := fmt.Sprintf("m%d/g%d", mi, g)
			if g%3 == 2 {
				workersWG.Go(func() { r.doWorker(m, holder, rng) })
			} else {
				workersWG.Go(func() { r.worker(m, r.exact[mi], holder, rng) })
			}
		}
	}
	<-ctx.Done()
	faultsWG.Wait() // every fault undone: the server runs, no proxy cuts anyone off
	for i, m := range managers {
		if err := m.Close(); err != nil {
			r.t.Logf("manager %d: Close: %v", i, err)
		}
	}
	workersWG.Wait()
}

// summary is the run's report as the test logs it: the statistics, the
// checker's verdicts, and what helps read a violation.
func (r *run) summary(h History, rep *Report, managers int, elapsed time.Duration) string {
	var b strings.Builder
	rep.Print(&b, r.stats(h, managers, elapsed))
	r.printDiagnostics(&b, h, rep)
	if rep.Linearizability.Failed() {
		r.visualize(&b, rep)
	}
	return b.String()
}

// stats are the run's counts.
func (r *run) stats(h History, managers int, elapsed time.Duration) *Stats {
	var st Stats
	st.Add("seed", "%d", r.cfg.seed)
	st.Add("duration", "%v", elapsed.Round(time.Millisecond))
	st.Add("lease TTL", "%v", r.ttl)
	st.Add("managers x workers", "%d x %d on %d names (%s)", managers, r.cfg.workers, len(r.names), strings.Join(r.names, " "))
	st.Add("acquire calls (Acquire + Do)", "%d", r.attempts.Load())
	st.Add("  acquisitions", "%d", r.acquired.Load())
	st.Add("  timed out waiting", "%d", r.acquireTimeouts.Load())
	st.Add("  failed with an error", "%d", r.acquireErrors.Load())
	st.Add("AcquireAll calls (sets of 2-3 names)", "%d", r.setCalls.Load())
	st.Add("  a name lost while the rest were taken", "%d", r.setLost.Load())
	st.Add("Do calls", "%d", r.doCalls.Load())
	st.Add("  ending in ErrLost", "%d", r.doLost.Load())
	st.Add("releases", "%d", r.releases.Load())
	st.Add("  ErrNotHeld", "%d", r.releaseNotHeld.Load())
	st.Add("    while live, from a retrying client", "%d", r.notHeldAmbiguous.Load())
	st.Add("  other errors", "%d", r.releaseErrors.Load())
	polls, failed := r.obs.counts()
	st.Add("observer polls (ok/failed)", "%d/%d", polls, failed)
	st.Add("tokens seen by the observer", "%d", len(h.Sightings))
	return &st
}

// printDiagnostics writes what helps read a violation: the observer's
// reads from a replica, commands a replica refused, acquire replies older
// than their request, the traces of the sections in violations, and the
// first errors.
func (r *run) printDiagnostics(b *strings.Builder, h History, rep *Report) {
	r.obs.mu.Lock()
	fmt.Fprintf(b, "observer polls answered by a replica: %d\n", r.obs.replicaReads)
	for _, e := range r.obs.replicaAt {
		fmt.Fprintf(b, "  %s\n", e)
	}
	r.obs.mu.Unlock()
	fmt.Fprintf(b, "commands a replica refused (READONLY), the first 20:\n")
	for _, e := range r.tracer.readonly {
		fmt.Fprintf(b, "  %s\n", e)
	}
	for _, f := range h.Faults {
		if f.Kind == "lagging replica promoted" && len(r.tracer.readonly) > 0 {
			fmt.Fprintf(b, "  promoted %s..%s (%s)\n", stamp(f.Start), stamp(f.End), f.Detail)
		}
	}
	fmt.Fprintf(b, "acquire replies older than their request (client-side): %d\n", len(r.tracer.early))
	for _, e := range r.tracer.early {
		fmt.Fprintf(b, "  %s\n", e)
	}
	if len(rep.Suspects) > 0 {
		seen := map[string][]Sighting{}
		for _, g := range h.Sightings {
			seen[g.Token] = append(seen[g.Token], g)
		}
		byID := map[int]Section{}
		for _, s := range h.Sections {
			byID[s.ID] = s
		}
		fmt.Fprintf(b, "traces of the sections in violations (the first 40):\n")
		for _, id := range rep.Suspects[:min(40, len(rep.Suspects))] {
			s := byID[id]
			fmt.Fprintf(b, "section %d %s %s: called %s, start %s, end %s (%s), deadline %s, fence %d\n",
				s.ID, s.Name, s.Holder, stamp(s.Called), stamp(s.Start), stamp(s.End), s.Ended, stamp(s.Deadline), s.Fence)
			r.tracer.trace(b, s.Token, h.Faults, seen)
		}
	}
	r.firstErrs.Range(func(k, v any) bool {
		fmt.Fprintf(b, "error seen %d times: %s\n", v.(*atomic.Int64).Load(), k)
		return true
	})
}

// visualize writes porcupine's visualisation of a failing history to
// $CHAOS_ARTIFACTS (or the temporary directory), and says where.
func (r *run) visualize(b *strings.Builder, rep *Report) {
	dir := os.Getenv("CHAOS_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("chaos-%s-porcupine-%d.html", strings.ReplaceAll(r.t.Name(), "/", "-"), r.cfg.seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Errorf("artifacts: %v", err)
	} else if err := rep.Linearizability.Visualize(path); err != nil {
		r.t.Errorf("porcupine's visualisation: %v", err)
	} else {
		fmt.Fprintf(b, "porcupine's visualisation of the failing history: %s\n", path)
	}
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// between returns a duration uniformly in [lo, hi) TTLs.
func (r *run) between(rng *rand.Rand, lo, hi float64) time.Duration {
	return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(r.ttl))
}

// heartbeat records the windows in which the runner's own process went
// unscheduled for longer than the watchdog's slack: a starved machine, a
// long GC pause. No lease context can be cancelled in time then, whatever
// the library does (S1 holds only while the holder's scheduler behaves), so
// the checker counts late cancellations inside such a window apart. A
// library that cancels late on its own is not excused: the heartbeat is
// on time then.
func (r *run) heartbeat(slack time.Duration) {
	const tick = 5 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(last) > tick+slack {
			r.rec.Fault(Fault{Kind: "runner not scheduled (heartbeat late by more than the slack)", Start: last, End: now, Starved: true})
		}
		last = now
	}
}

// enabled returns those of kinds that the run injects (-chaos.faults), in
// the order given.
func (r *run) enabled(kinds ...string) []string {
	var on []string
	for _, k := range kinds {
		if r.faults[k] {
			on = append(on, k)
		}
	}
	return on
}

// serverFaults pauses the server, kills and restarts it, brings it back
// with older data or fails over to a lagging replica, one fault at a time,
// until the run ends.
func (r *run) serverFaults(rng *rand.Rand) {
	kinds := r.enabled("pause", "restart", "oldrdb", "everysec", "promote")
	if len(kinds) == 0 {
		return
	}
	for {
		sleepCtx(r.ctx, r.between(rng, 1, 4))
		if r.ctx.Err() != nil {
			return
		}
		var err error
		switch kinds[rng.IntN(len(kinds))] {
		case "pause":
			err = r.pause(rng)
		case "restart":
			err = r.restart(rng)
		case "oldrdb":
			err = r.oldSnapshot(rng)
		case "everysec":
			err = r.everysec(rng)
		case "promote":
			err = r.promote(rng)
		}
		if err != nil {
			r.t.Errorf("server fault: %v", err)
			return
		}
	}
}

func (r *run) pause(rng *rand.Rand) error {
	d := r.between(rng, 0.2, 2)
	start := time.Now()
	if err := r.srv.Pause(); err != nil {
		return err
	}
	sleepCtx(r.ctx, d)
	if err := r.srv.Resume(); err != nil {
		return err
	}
	r.rec.Fault(Fault{Kind: "redis pause (SIGSTOP)", Start: start, End: time.Now()})
	return nil
}

func (r *run) restart(rng *rand.Rand) error {
	lossy := rng.Float64() < r.cfg.lossy
	d := r.between(rng, 0.1, 1.5)
	start := time.Now()
	if err := r.srv.Kill(); err != nil {
		return err
	}
	kind := "redis kill+restart, AOF kept"
	if lossy {
		// The AOF is gone: the server comes back empty.
		if err := os.RemoveAll(filepath.Join(r.srv.Dir(), "appendonlydir")); err != nil {
			return fmt.Errorf("removing the AOF: %w", err)
		}
		kind = "redis kill+restart, data lost"
	}
	sleepCtx(r.ctx, d)
	if err := r.srv.Restart(); err != nil {
		return err
	}
	r.rec.Fault(Fault{Kind: kind, Start: start, End: time.Now(), LosesData: lossy})
	return nil
}

// oldSnapshot saves an RDB snapshot, lets the holders go on for a while
// (acquisitions move the fencing counters past the snapshot's), then kills
// the server and brings it back from the snapshot with its AOF gone: the
// counters come back older than fences already handed out.
func (r *run) oldSnapshot(rng *rand.Rand) error {
	snap, err := r.srv.Save()
	if err != nil {
		return err
	}
	sleepCtx(r.ctx, r.between(rng, 0.5, 3))
	d := r.between(rng, 0.1, 1)
	start := time.Now()
	if err := r.srv.Kill(); err != nil {
		return err
	}
	sleepCtx(r.ctx, d)
	if err := r.srv.RestartFromSnapshot(snap); err != nil {
		return err
	}
	r.rec.Fault(Fault{Kind: "redis restart from an older RDB snapshot", Start: start, End: time.Now(), LosesData: true})
	return nil
}

// everysec switches the server to appendfsync everysec, marks its AOF (an
// fsync), and within the next second kills it and brings it back with the
// AOF cut to the mark, sometimes in the middle of a command: what a host
// that went down with Redis keeps of a file fsynced once a second. (A kill
// alone loses nothing: the kernel keeps what Redis wrote.) The restart
// reads the config file again, so appendfsync is back to always.
func (r *run) everysec(rng *rand.Rand) error {
	c := r.srv.NewClient()
	err := c.ConfigSet(context.Background(), "appendfsync", "everysec").Err()
	_ = c.Close()
	if err != nil {
		return fmt.Errorf("appendfsync everysec: %w", err)
	}
	mark, err := r.srv.MarkAOF()
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond) // not cut short by the run's end: the restart undoes the fault
	extra := int64(0)
	if rng.IntN(2) == 0 {
		extra = int64(1 + rng.IntN(64)) // a torn command at the end
	}
	d := r.between(rng, 0.1, 1)
	start := time.Now()
	if err := r.srv.Kill(); err != nil {
		return err
	}
	sleepCtx(r.ctx, d)
	if err := r.srv.RestartLosingAOFTail(mark, extra); err != nil {
		return err
	}
	r.rec.Fault(Fault{Kind: "redis killed with appendfsync everysec, AOF tail lost", Start: start, End: time.Now(), LosesData: true})
	return nil
}

// attachStandby makes r.standby a replica of r.srv through a fresh link
// proxy, and waits until it is in sync.
func (r *run) attachStandby() error {
	link, err := redistest.NewProxy(r.srv.Addr())
	if err != nil {
		return err
	}
	r.link = link
	if err := r.standby.ReplicaOf(link.Addr()); err != nil {
		return err
	}
	return r.standby.WaitReplicaSynced(30 * time.Second)
}

// promote cuts the standby off from the primary (a black hole on its
// replication link: what the primary sends from then on never arrives), lets
// the holders go on, kills the primary, promotes the standby with the data
// it had (REPLICAOF NO ONE) and points every client at it, as a failover
// to a replica that lagged would. The old primary then comes back as the
// new standby.
func (r *run) promote(rng *rand.Rand) error {
	r.link.BlackHole(true)
	cut := time.Now()
	sleepCtx(r.ctx, r.between(rng, 0.5, 2))
	start := time.Now()
	old, promoted := r.srv, r.standby
	if err := old.Kill(); err != nil {
		return err
	}
	if err := promoted.ReplicaOf(""); err != nil {
		return err
	}
	for _, p := range r.proxies {
		p.SetTarget(promoted.Addr())
		p.ResetConnections()
	}
	r.obs.retarget(promoted.Addr())
	r.rec.Fault(Fault{Kind: "lagging replica promoted", Start: start, End: time.Now(), LosesData: true,
		Detail: "replica cut off at " + stamp(cut)})

	_ = r.link.Close()
	r.srv, r.standby = promoted, old
	if err := old.Restart(); err != nil {
		return err
	}
	return r.attachStandby()
}

// clientFaults disturbs one client's proxy at a time, or asks a holder to
// stall, until the run ends.
func (r *run) clientFaults(rng *rand.Rand) {
	kinds := r.enabled("latency", "blackhole", "reset", "gcstall")
	if len(kinds) == 0 {
		return
	}
	for {
		sleepCtx(r.ctx, r.between(rng, 0.5, 2))
		if r.ctx.Err() != nil {
			return
		}
		pi := rng.IntN(len(r.proxies))
		p, detail := r.proxies[pi], fmt.Sprintf("client %d", pi)
		start := time.Now()
		switch kinds[rng.IntN(len(kinds))] {
		case "latency":
			p.SetLatency(time.Millisecond + r.between(rng, 0, 0.4))
			sleepCtx(r.ctx, r.between(rng, 0.5, 3))
			p.SetLatency(0)
			r.rec.Fault(Fault{Kind: "client latency", Start: start, End: time.Now(), Detail: detail})
		case "blackhole":
			p.BlackHole(true)
			sleepCtx(r.ctx, r.between(rng, 0.3, 2.5))
			p.BlackHole(false)
			r.rec.Fault(Fault{Kind: "client black hole", Start: start, End: time.Now(), Detail: detail})
		case "reset":
			p.ResetConnections()
			r.rec.Fault(Fault{Kind: "client connections reset", Start: start, End: time.Now(), Detail: detail})
		case "gcstall":
			// The next holder to take it records it. Half go to holders
			// of sets, which are a quarter of the loops: a set must be
			// stalled now and then for its context's link to its
			// members to matter.
			if r.sets && rng.IntN(2) == 0 {
				r.setStallsPending.Add(1)
			} else {
				r.stallsPending.Add(1)
			}
		}
	}
}

// takeStall claims one of pending's stalls, if any.
func takeStall(pending *atomic.Int64) bool {
	for {
		n := pending.Load()
		if n <= 0 {
			return false
		}
		if pending.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// holdFor picks how long a holder works: mostly briefly, sometimes across
// several renewals so that faults find leases held.
func (r *run) holdFor(rng *rand.Rand) time.Duration {
	if rng.IntN(20) == 0 {
		return r.between(rng, 1, 2.5)
	}
	return r.between(rng, 0, 0.05)
}

// contextEnd records when ctx is cancelled.
type contextEnd struct {
	at   time.Time
	done chan struct{}
}

func watchEnd(ctx context.Context) *contextEnd {
	e := &contextEnd{done: make(chan struct{})}
	context.AfterFunc(ctx, func() {
		e.at = time.Now()
		close(e.done)
	})
	return e
}

func endingOf(cause error) Ending {
	switch {
	case errors.Is(cause, lease.ErrReleased):
		return EndReleased
	case errors.Is(cause, lease.ErrLost):
		return EndLost
	case errors.Is(cause, lease.ErrClosed):
		return EndClosed
	}
	return EndUnknown
}

// worker acquires, writes to the fenced store, works, writes again while
// the lease is live, and releases; now and then it stalls past its lease
// and writes anyway. On a semaphore it holds a permit, on a read-write lock
// a read lock (two times in three) or the write lock; only leases and
// writers write.
func (r *run) worker(m *lease.Manager, exact bool, holder string, rng *rand.Rand) {
	permits, locks := semaphore.New(m), rwlock.New(m)
	for r.ctx.Err() == nil {
		if r.sets && rng.IntN(4) == 0 {
			if !r.holdSet(m, holder, rng) {
				return
			}
			continue
		}
		name := r.names[rng.IntN(len(r.names))]
		// A stall models a process paused past its lease: nothing renews
		// the lease meanwhile (a paused process's watchdog is paused too),
		// so it is taken without auto-renewal.
		stall := takeStall(&r.stallsPending)
		var opts []lease.AcquireOption
		if stall {
			opts = append(opts, lease.WithAutoRenew(false))
		}
		kind, limit, count := r.kinds[name], 0, 0
		if kind == KindRead && rng.IntN(3) == 0 {
			kind = KindWrite
		}
		actx, cancel := context.WithTimeout(r.ctx, 2*r.ttl)
		r.attempts.Add(1)
		called := time.Now()
		var (
			l   *lease.Lease
			err error
		)
		switch kind {
		case KindLease:
			l, err = m.Acquire(actx, name, opts...)
		case KindPermit:
			limit = semN
			if rng.IntN(3) == 0 { // all of them at once, one time in three
				count = semN
				l, err = permits.AcquireN(actx, name, semN, semN, opts...)
			} else {
				l, err = permits.Acquire(actx, name, semN, opts...)
			}
		case KindRead:
			l, err = locks.RLock(actx, name, opts...)
		case KindWrite:
			l, err = locks.Lock(actx, name, opts...)
		}
		cancel()
		if err != nil {
			if stall {
				r.stallsPending.Add(1) // for the next holder
			}
			if errors.Is(err, lease.ErrClosed) {
				return
			}
			if errors.Is(err, lease.ErrNotAcquired) {
				r.acquireTimeouts.Add(1)
			} else {
				r.acquireErrors.Add(1)
				r.noteErr("acquire", err)
				sleepCtx(r.ctx, 10*time.Millisecond) // the server may be down: do not spin
			}
			continue
		}
		start := time.Now()
		r.grantedAt.Delete(l) // only holdSet reads it
		r.acquired.Add(1)
		end := watchEnd(l.Context())
		s := Section{ID: r.rec.NextID(), Name: name, Kind: kind, Limit: limit, Count: count, Holder: holder, Token: l.Token(), Fence: l.Fence(), Called: called, Start: start}
		writes := kind.exclusive()
		if writes {
			r.write(s, false)
		}
		if stall {
			// The holder stops looking at its context for longer than the
			// lease, then writes with its old fence; the lease's context is
			// still cancelled by its local deadline.
			s.Stalled = true
			d := r.between(rng, 1.2, 2)
			time.Sleep(d)
			r.rec.Fault(Fault{Kind: "holder stalled past its lease", Start: start, End: time.Now()})
			if writes {
				r.write(s, true)
			}
		} else {
			// Not woken by the run's end: Close finds some holders inside.
			sleepCtx(l.Context(), r.holdFor(rng))
			if writes && l.Context().Err() == nil {
				r.write(s, false)
			}
		}
		stopped := time.Now()
		s.Deadline = l.Deadline()
		rctx, cancel := context.WithTimeout(context.Background(), r.ttl/2)
		err = l.Release(rctx)
		answered := time.Now()
		cancel()
		<-end.done // Release always ends the lease's context
		r.releases.Add(1)
		switch {
		case err == nil:
		case errors.Is(err, lease.ErrNotHeld):
			r.releaseNotHeld.Add(1)
			// Not held, yet the context was live when Release ended it, and
			// the answer came before the local deadline, so before the
			// server could expire the key: the server dropped the lease
			// while its holder believed in it. Only a client that does not
			// retry gives an exact answer.
			if !errors.Is(err, lease.ErrLost) && !errors.Is(err, lease.ErrClosed) && answered.Before(s.Deadline) {
				if exact {
					s.UnnoticedLoss = true
				} else {
					r.notHeldAmbiguous.Add(1)
				}
			}
		default:
			r.releaseErrors.Add(1)
			r.noteErr("release", err)
		}
		s.End = end.at
		if stopped.Before(s.End) {
			s.End = stopped
		}
		s.Ended = endingOf(context.Cause(l.Context()))
		r.rec.Section(s)
	}
}

// hooks record when each acquisition returned, for holdSet.
func (r *run) hooks() lease.Hooks {
	return lease.Hooks{AcquireDone: func(_ context.Context, info lease.AcquireInfo) {
		if info.Lease != nil {
			r.grantedAt.Store(info.Lease, time.Now())
		}
	}}
}

// holdSet takes two or three of the lease names at once (AcquireAll, asked
// in a random order), writes to each under its own fence, works, writes
// again while the set is live, and releases the set: one section a name,
// each ending when the set's context ends (or the holder stops), since a
// holder of a set works on all its names until then. Now and then it stalls
// past its leases and writes anyway, as worker's holders do. It reports
// false when the manager is closed.
func (r *run) holdSet(m *lease.Manager, holder string, rng *rand.Rand) bool {
	var names []string
	for _, n := range r.names {
		if r.kinds[n] == KindLease {
			names = append(names, n)
		}
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:min(len(names), 2+rng.IntN(2))]
	// A stalled set is taken without auto-renewal, as a stalled lease is:
	// its members' contexts end at their local deadlines, and the set's
	// with the first of them.
	stall := takeStall(&r.setStallsPending)
	var opts []lease.AcquireOption
	if stall {
		opts = append(opts, lease.WithAutoRenew(false))
	}
	actx, cancel := context.WithTimeout(r.ctx, 2*r.ttl)
	r.attempts.Add(1)
	r.setCalls.Add(1)
	called := time.Now()
	set, err := m.AcquireAll(actx, names, opts...)
	cancel()
	if err != nil && stall {
		r.setStallsPending.Add(1) // for the next holder of a set
	}
	switch {
	case errors.Is(err, lease.ErrClosed):
		return false
	case errors.Is(err, lease.ErrNotAcquired):
		r.acquireTimeouts.Add(1)
		return true
	case errors.Is(err, lease.ErrLost):
		r.setLost.Add(1)
		return true
	case err != nil:
		r.acquireErrors.Add(1)
		r.noteErr("AcquireAll", err)
		sleepCtx(r.ctx, 10*time.Millisecond)
		return true
	}
	start := time.Now()
	r.acquired.Add(1)
	end := watchEnd(set.Context())
	leases := set.Leases()
	ss := make([]Section, len(leases))
	for i, l := range leases {
		// A member's section starts when its own Acquire returned: from
		// then on the server holds the name for the set, which a section
		// starting when the set was whole would leave out (another holder
		// taking the name after a data-losing fault in between would look
		// like an overlap, and its fence like one going backwards).
		granted := start
		if at, ok := r.grantedAt.LoadAndDelete(l); ok {
			granted = at.(time.Time)
		}
		ss[i] = Section{ID: r.rec.NextID(), Name: l.Name(), Kind: KindLease, Holder: holder + " (set)", Token: l.Token(),
			Fence: l.Fence(), Called: called, Start: granted, Stalled: stall}
		r.write(ss[i], false)
	}
	if stall {
		// The holder stops looking at the set's context for longer than
		// any of its leases, then writes to each name with its old fence.
		time.Sleep(r.between(rng, 1.2, 2))
		r.rec.Fault(Fault{Kind: "holder of a set stalled past its leases", Start: start, End: time.Now()})
		for _, s := range ss {
			r.write(s, true)
		}
	} else {
		// Longer than a single lease's usual hold: work on several names
		// at once takes a while, and a set must be held across faults for
		// a lost member to matter.
		sleepCtx(set.Context(), r.between(rng, 0.5, 2.5))
		if set.Context().Err() == nil {
			for _, s := range ss {
				r.write(s, false)
			}
		}
	}
	stopped := time.Now()
	for i, l := range leases {
		ss[i].Deadline = l.Deadline()
	}
	rctx, cancel := context.WithTimeout(context.Background(), r.ttl/2)
	err = set.Release(rctx)
	cancel()
	<-end.done // Release always ends the set's context
	r.releases.Add(1)
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrNotHeld):
		r.releaseNotHeld.Add(1)
	default:
		r.releaseErrors.Add(1)
		r.noteErr("set release", err)
	}
	for i, l := range leases {
		s := ss[i]
		s.End = end.at
		if stopped.Before(s.End) {
			s.End = stopped
		}
		s.Ended = endingOf(context.Cause(l.Context()))
		r.rec.Section(s)
	}
	return true
}

// doWorker does the same through Do (lease.Manager's, or semaphore's on
// the semaphore), whose function finds its lease with lease.FromContext.
// It leaves read-write locks to worker.
func (r *run) doWorker(m *lease.Manager, holder string, rng *rand.Rand) {
	permits := semaphore.New(m)
	var names []string
	for _, n := range r.names {
		if r.kinds[n] != KindRead {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		r.worker(m, false, holder, rng)
		return
	}
	for r.ctx.Err() == nil {
		name := names[rng.IntN(len(names))]
		kind, limit := r.kinds[name], 0
		do := m.Do
		if kind == KindPermit {
			limit = semN
			do = func(ctx context.Context, name string, fn func(context.Context) error, opts ...lease.AcquireOption) error {
				return permits.Do(ctx, name, semN, fn, opts...)
			}
		}
		hold := r.holdFor(rng)
		dctx, cancel := context.WithTimeout(r.ctx, 2*r.ttl+hold)
		var (
			s       Section
			end     *contextEnd
			stopped time.Time
		)
		r.attempts.Add(1)
		r.doCalls.Add(1)
		called := time.Now()
		err := do(dctx, name, func(ctx context.Context) error {
			s = Section{ID: r.rec.NextID(), Name: name, Kind: kind, Limit: limit, Holder: holder + " (Do)", Called: called, Start: time.Now()}
			r.acquired.Add(1)
			end = watchEnd(ctx)
			l, ok := lease.FromContext(ctx)
			if !ok {
				r.t.Errorf("Do's function context carries no lease")
			} else {
				r.grantedAt.Delete(l) // only holdSet reads it
				s.Token, s.Fence = l.Token(), l.Fence()
				if kind == KindLease {
					r.write(s, false)
				}
			}
			sleepCtx(ctx, hold)
			stopped = time.Now()
			if ok {
				s.Deadline = l.Deadline()
				if kind == KindLease && ctx.Err() == nil {
					r.write(s, false)
				}
			}
			return nil
		})
		cancel()
		if end == nil { // never acquired
			switch {
			case errors.Is(err, lease.ErrClosed):
				return
			case errors.Is(err, lease.ErrNotAcquired):
				r.acquireTimeouts.Add(1)
			case err != nil:
				r.acquireErrors.Add(1)
				r.noteErr("Do acquire", err)
				sleepCtx(r.ctx, 10*time.Millisecond)
			}
			continue
		}
		<-end.done // Do cancels fn's context when it returns
		s.End = end.at
		if stopped.Before(s.End) {
			s.End = stopped
		}
		s.Ended = EndReleased
		switch {
		case errors.Is(err, lease.ErrLost):
			s.Ended = EndLost
			r.doLost.Add(1)
		case errors.Is(err, lease.ErrClosed):
			s.Ended = EndClosed
		case err != nil:
			r.doErrors.Add(1)
			r.noteErr("Do", err)
		}
		r.rec.Section(s)
	}
}

// observer polls the lease keys about every millisecond on a connection of
// its own, straight to the server (following a promotion), and records when
// each token was last seen, when its key's TTL would run out, and when it
// was first seen gone. Each poll reads the values and their PEXPIRETIME in
// one MULTI, so the expiry read is the one of the token read. A semaphore's
// or a read lock's key is a sorted set of permit tokens scored by their
// expiry (server ms), read with ZRANGE in the same MULTI: a permit is held
// while its score is ahead of the server's clock.
type observer struct {
	client *redis.Client
	addr   atomic.Pointer[string]
	names  []string
	keys   []string

	mu      sync.Mutex
	shared  []bool                 // names[i]'s key may hold permits
	seen    map[string][]*Sighting // token -> its appearances
	current map[string][]string    // name -> tokens in the key at the last poll
	polls   int64
	failed  int64
	// Polls a replica answered (ROLE not master), with the first ones.
	replicaReads int64
	replicaAt    []string
}

func newObserver(srv *redistest.Server, names []string, kinds map[string]Kind) *observer {
	o := &observer{names: names, seen: map[string][]*Sighting{}, current: map[string][]string{}}
	for _, n := range names {
		o.shared = append(o.shared, !kinds[n].exclusive())
	}
	o.retarget(srv.Addr())
	opts := srv.Options()
	opts.MaxRetries = -1 // every poll's times are its own
	opts.PoolSize = 1
	opts.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		addr := *o.addr.Load()
		c, err := d.DialContext(ctx, network, addr)
		if err == nil && *o.addr.Load() != addr {
			// Retargeted while dialing: this may be the old primary,
			// restarted as the new replica.
			_ = c.Close()
			return nil, errors.New("observer retargeted while dialing")
		}
		return c, err
	}
	o.client = redis.NewClient(opts)
	for _, n := range names {
		o.keys = append(o.keys, "tenure:{"+n+"}")
	}
	return o
}

// retarget points the observer at another server; its open connection,
// to a killed server, fails and the next poll dials the new one.
func (o *observer) retarget(addr string) { o.addr.Store(&addr) }

func (o *observer) counts() (polls, failed int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.polls, o.failed
}

func (o *observer) run(ctx context.Context) {
	defer o.client.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		sent := time.Now()
		var (
			mget  *redis.SliceCmd
			exps  []*redis.Cmd
			zsets []*redis.ZSliceCmd
			role  *redis.Cmd
		)
		_, err := o.client.TxPipelined(pctx, func(p redis.Pipeliner) error {
			role = p.Do(pctx, "ROLE")
			mget = p.MGet(pctx, o.keys...)
			exps, zsets = exps[:0], zsets[:0]
			for i, k := range o.keys {
				exps = append(exps, p.Do(pctx, "PEXPIRETIME", k))
				if o.shared[i] {
					zsets = append(zsets, p.ZRangeWithScores(pctx, k, 0, -1))
				} else {
					zsets = append(zsets, nil)
				}
			}
			return nil
		})
		got := time.Now()
		cancel()
		var vals []any
		if err != nil && role.Err() == nil && mget.Err() == nil {
			// A ZRANGE of a read-write lock's key that a writer's lease
			// holds answers WRONGTYPE, which is no failed poll.
			err = nil
		}
		if err == nil {
			vals, err = mget.Result()
		}
		if err == nil {
			// A replica's view lags the primary's: it would show an
			// expiry the primary has since renewed. Such a poll is not
			// a sighting.
			if r, _ := role.Slice(); len(r) == 0 || r[0] != "master" {
				o.mu.Lock()
				o.replicaReads++
				if len(o.replicaAt) < 20 {
					o.replicaAt = append(o.replicaAt, fmt.Sprintf("%s %v (observer's address %s)", stamp(sent), r, *o.addr.Load()))
				}
				o.mu.Unlock()
				err = errors.New("answered by a replica")
			}
		}
		if err != nil {
			o.mu.Lock()
			o.failed++
			o.mu.Unlock()
			sleepCtx(ctx, 5*time.Millisecond)
			continue
		}
		o.mu.Lock()
		o.polls++
		for i, v := range vals {
			name := o.names[i]
			// What holds the name now, and until when the server keeps
			// each: a lease's key until its TTL runs out (Redis serves it
			// through the millisecond of its PEXPIRETIME), a permit until
			// its score.
			now := map[string]time.Time{}
			if tok, _ := v.(string); tok != "" {
				var until time.Time
				if ms, err := exps[i].Int64(); err == nil && ms > 0 {
					until = time.UnixMilli(ms + 1)
				}
				now[tok] = until
			}
			if zsets[i] != nil {
				if zs, err := zsets[i].Result(); err == nil {
					for _, z := range zs {
						if tok, ok := z.Member.(string); ok {
							now[tok] = time.UnixMilli(int64(z.Score))
						}
					}
				}
			}
			for _, prev := range o.current[name] {
				if _, still := now[prev]; still {
					continue
				}
				if gs := o.seen[prev]; len(gs) > 0 && gs[len(gs)-1].GoneBy.IsZero() {
					gs[len(gs)-1].GoneBy = got
				}
			}
			cur := o.current[name][:0]
			for tok, until := range now {
				cur = append(cur, tok)
				gs := o.seen[tok]
				if len(gs) == 0 || !gs[len(gs)-1].GoneBy.IsZero() {
					// First seen, or back after it was seen gone: a new
					// appearance.
					gs = append(gs, &Sighting{Name: name, Token: tok, FirstSeen: sent})
					o.seen[tok] = gs
				}
				g := gs[len(gs)-1]
				g.LastSeen = sent
				if !until.IsZero() {
					g.ExpiresAt = until
				}
			}
			o.current[name] = cur
		}
		o.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func (o *observer) sightings() []Sighting {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Sighting, 0, len(o.seen))
	for _, gs := range o.seen {
		for _, g := range gs {
			out = append(out, *g)
		}
	}
	return out
}
