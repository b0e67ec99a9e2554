package main

// Scenario 7, semaphores and read-write locks (packages semaphore and
// rwlock), against the baseline permit: the raw commands a permit-expirable
// semaphore needs, as Redisson's RPermitExpirableSemaphore sends them, with
// nothing around them. The implementations, the baseline's scripts and
// waiting included, are in semaphore_impls.go. Three parts, each run once a
// repeat:
//
//   - cycle: acquire + release in a loop from 1 and 32 goroutines: tenure's
//     permit, RLock, Lock, two permits at once and two names at once, each
//     against its baseline in the same run (the baseline permit, or scenario
//     1's raw lease) and against tenure's plain lease. Cycles a second,
//     latency, round trips, allocations, Redis µs (commandstats) and Redis
//     CPU (INFO cpu) per cycle;
//   - handoff: a semaphore of 3 permits kept full by 8 and 32 goroutines,
//     one release at a time, each taken by a waiter that was waiting: the
//     time from the release to the waiter holding, tenure (woken by the
//     manager's pub/sub message) against the baseline (woken by its own).
//     More than 3 permits held at once fails the run;
//   - read-write safety: readers and writers of one tenure read-write lock
//     on two managers; a writer overlapping anyone, or a reader a writer,
//     fails the run.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/rwlock"
)

const (
	// semN is the number of permits of every semaphore of the scenario.
	semN = 3
	// semNames is how many names the permits and read locks of the cycle
	// spread over: at 32 goroutines two share each name, so at most two of
	// its three permits are held and an acquisition never waits.
	semNames = 16
	// semTTL is the TTL of every permit and lock, as in scenario 1: no
	// renewal falls inside a measurement.
	semTTL = 10 * time.Second
)

// A semVariant is one row of the cycle table: an implementation, the name
// each goroutine cycles on, and the baseline its time is divided by.
type semVariant struct {
	semImpl
	Base   string
	shared bool // goroutine g uses name g%semNames, else a name of its own
}

func semVariants() []semVariant {
	return []semVariant{
		{semImpl: tenurePermitImpl(semN), Base: "baseline permit", shared: true},
		{semImpl: baselinePermitImpl(semN), Base: "baseline permit", shared: true},
		{semImpl: tenureRWImpl(false), Base: "baseline permit", shared: true},
		{semImpl: tenureRWImpl(true), Base: "baseline lease"},
		{semImpl: fromLease(tenureImpl(), "tenure lease", "lease.Manager.Acquire + Release (scenario 1's tenure)"), Base: "baseline lease"},
		{semImpl: fromLease(baselineImpl(), "baseline lease", "SET NX PX + EVALSHA compare-and-delete (scenario 1's baseline)"), Base: "baseline lease"},
		{semImpl: tenurePermitsKImpl(semN, 2), Base: "baseline 2 permits"},
		{semImpl: baselinePermitsKImpl(semN, 2), Base: "baseline 2 permits"},
		{semImpl: tenureSetImpl(), Base: "baseline 2 names"},
		{semImpl: baselineSetImpl(), Base: "baseline 2 names"},
	}
}

func (v semVariant) name(g int) string {
	tag := strings.ReplaceAll(v.Name, " ", "-")
	if v.shared {
		return fmt.Sprintf("sem-%s-%d", tag, g%semNames)
	}
	return fmt.Sprintf("sem-%s-%d", tag, g)
}

type semCycleResult struct {
	Impl       string
	Base       string // the baseline the report divides its time by
	Goroutines int
	Run        int
	Ops        int64
	Seconds    float64
	OpsPerSec  float64
	NsPerOp    float64 // wall time per cycle per goroutine
	TripsPerOp float64
	AllocsOp   float64 // heap allocations of the whole process per cycle
	RedisUsOp  float64 // INFO commandstats usec of the commands the client sent, per cycle
	CPUUsOp    float64 // server CPU per cycle (INFO cpu)
	Lat        latencySummary
	Errors     int64
}

type semHandoffResult struct {
	Impl       string
	Goroutines int
	Run        int
	Seconds    float64
	Handoffs   int64
	PerSec     float64
	// Handoff is, for each release of a full semaphore, the time from the
	// holder sending its release to a waiter's acquire returning; Release
	// is the release call's own round trip, the unit the Trips fields count
	// in.
	Handoff     latencySummary
	Release     latencySummary
	P50Trips    float64
	P99Trips    float64
	CmdsPerHand float64 // commands both clients sent per handoff, the waiters' tries included
	MaxLive     int64   // the most permits held at once: must be at most semN
	Errors      int64
}

type rwMixResult struct {
	Run        int
	Goroutines int
	Writers    int
	Seconds    float64
	Reads      int64
	Writes     int64
	MaxReaders int64
	Overlaps   int64 // a writer with anyone else: must be 0
}

// semaphoreResults is scenario 7.
type semaphoreResults struct {
	N       int
	Names   int
	Cycle   []semCycleResult
	Handoff []semHandoffResult
	RWMix   []rwMixResult
	Notes   map[string]string
}

// semaphoreFailures are the scenario's safety failures.
func semaphoreFailures(s *semaphoreResults) []string {
	var out []string
	for _, h := range s.Handoff {
		if h.MaxLive > int64(s.N) {
			out = append(out, fmt.Sprintf("scenario 7: %s held %d permits of a semaphore of %d at once (%d goroutines)", h.Impl, h.MaxLive, s.N, h.Goroutines))
		}
	}
	for _, m := range s.RWMix {
		if m.Overlaps > 0 {
			out = append(out, fmt.Sprintf("scenario 7: a writer overlapped another holder %d times (%d goroutines, %d writers)", m.Overlaps, m.Goroutines, m.Writers))
		}
	}
	return out
}

func runSemaphore(ctx context.Context, cfg runConfig, addr string) (*semaphoreResults, error) {
	res := &semaphoreResults{N: semN, Names: semNames, Notes: map[string]string{}}
	vs := semVariants()
	for _, v := range vs {
		res.Notes[v.Name] = v.Note
	}
	bs, closeAll, err := buildSemVariants(addr, vs)
	defer closeAll()
	if err != nil {
		return res, err
	}
	admin, _ := newClient(addr, 1)
	defer admin.Close()
	for run := range cfg.runs {
		if err := semCycles(ctx, cfg, admin, bs, run, res); err != nil {
			return res, err
		}
		if err := semHandoffs(ctx, cfg, addr, run, res); err != nil {
			return res, err
		}
		m, err := rwMixOnce(ctx, addr, 8, 2, cfg.semMixDur, fmt.Sprintf("rw-mix-%d", run))
		m.Run = run
		res.RWMix = append(res.RWMix, m)
		cfg.logf("  rwlock mix run %d: %d reads, %d writes, at most %d readers at once, %d overlaps", run, m.Reads, m.Writes, m.MaxReaders, m.Overlaps)
		if err != nil {
			return res, fmt.Errorf("rwlock mix: %w", err)
		}
	}
	return res, nil
}

// semBuilt is a cycle variant built on a client of its own, with hooks
// that count what it sends.
type semBuilt struct {
	semVariant
	l     locker
	h     *counter
	names *nameHook
	c     *redis.Client
}

// buildSemVariants builds every variant, each on a client of its own (the
// baseline subscribes to every name it will cycle on); closeAll closes what
// was built, after an error too.
func buildSemVariants(addr string, vs []semVariant) (bs []semBuilt, closeAll func(), err error) {
	closeAll = func() {
		for _, b := range bs {
			_ = b.l.close()
			_ = b.c.Close()
		}
	}
	for _, v := range vs {
		c, h := newClient(addr, 36)
		names := &nameHook{}
		c.AddHook(names)
		var all []string
		for g := range 32 {
			all = append(all, v.name(g))
		}
		l, err := v.new(c, all)
		if err != nil {
			c.Close()
			return bs, closeAll, fmt.Errorf("%s: %w", v.Name, err)
		}
		bs = append(bs, semBuilt{v, l, h, names, c})
	}
	return bs, closeAll, nil
}

// semCycles measures every cycle variant at 1 and 32 goroutines, in an
// order that rotates with run.
func semCycles(ctx context.Context, cfg runConfig, admin *redis.Client, bs []semBuilt, run int, res *semaphoreResults) error {
	for _, par := range []int{1, 32} {
		for k := range bs {
			b := bs[(k+run)%len(bs)]
			r, err := semCycleOnce(ctx, admin, b, par, cfg.semCycleDur)
			if err != nil {
				return err
			}
			r.Run = run
			res.Cycle = append(res.Cycle, r)
			cfg.logf("  semaphore cycle run %d %-16s g=%-2d %8.0f ops/s  %.2f trips/op  %.0f allocs/op  redis %.1fµs/op (cpu %.1fµs)  p50 %v",
				run, b.Name, par, r.OpsPerSec, r.TripsPerOp, r.AllocsOp, r.RedisUsOp, r.CPUUsOp, r.Lat.P50)
			if r.Errors > 0 {
				return fmt.Errorf("semaphore cycle %s: %d errors", b.Name, r.Errors)
			}
		}
	}
	return nil
}

// semCycleOnce measures b's cycle from par goroutines for d, after a
// warm-up, from reset server statistics.
func semCycleOnce(ctx context.Context, admin *redis.Client, b semBuilt, par int, d time.Duration) (semCycleResult, error) {
	if r := semCycleLoop(ctx, b.l, b.name, par, 0, 64); r.Errors > 0 {
		return r, fmt.Errorf("%s warm-up: %d errors", b.Name, r.Errors)
	}
	b.h.reset()
	b.names.reset()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return semCycleResult{}, err
	}
	rc := redisCPU(ctx, admin)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	r := semCycleLoop(ctx, b.l, b.name, par, d, 0)
	runtime.ReadMemStats(&m1)
	ops := float64(max(r.Ops, 1))
	r.CPUUsOp = (redisCPU(ctx, admin) - rc) * 1e6 / ops
	stats, err := commandStats(ctx, admin)
	if err != nil {
		return r, err
	}
	for name, s := range stats {
		if name != "info" && name != "config|resetstat" && b.names.sent(name) > 0 {
			r.RedisUsOp += float64(s.usec) / ops
		}
	}
	r.AllocsOp = float64(m1.Mallocs-m0.Mallocs) / ops
	r.TripsPerOp = float64(b.h.trips.Load()) / ops
	r.Impl, r.Base, r.Goroutines = b.Name, b.Base, par
	return r, nil
}

// semHandoffs runs the handoff of tenure's permits and of the baseline's at
// each count of goroutines, in an order that rotates with run.
func semHandoffs(ctx context.Context, cfg runConfig, addr string, run int, res *semaphoreResults) error {
	impls := []semImpl{tenurePermitImpl(semN), baselinePermitImpl(semN)}
	for _, g := range cfg.semGoroutines {
		for k := range impls {
			im := impls[(k+run)%len(impls)]
			r, err := semHandoffOnce(ctx, im, addr, semN, g, cfg.semHandoffDur, fmt.Sprintf("sem-handoff-%d-%d-%s", run, g, strings.ReplaceAll(im.Name, " ", "-")))
			r.Run = run
			res.Handoff = append(res.Handoff, r)
			cfg.logf("  semaphore handoff run %d %-16s g=%-2d %6.0f handoffs/s  release → holder p50 %v p99 %v (%.1f / %.1f release round trips)  %.1f cmds/handoff  max live %d",
				run, im.Name, g, r.PerSec, r.Handoff.P50.Round(time.Microsecond), r.Handoff.P99.Round(time.Microsecond), r.P50Trips, r.P99Trips, r.CmdsPerHand, r.MaxLive)
			if err != nil {
				return fmt.Errorf("semaphore handoff %s g=%d: %w", im.Name, g, err)
			}
		}
	}
	return nil
}

// semCycleLoop runs acquire+release from par goroutines, goroutine g on
// name(g), for d (or, if d is 0, count cycles in all).
func semCycleLoop(ctx context.Context, l locker, name func(int) string, par int, d time.Duration, count int64) semCycleResult {
	// Each goroutine's name, made before the clock starts: the loop's
	// allocations are the cycle's.
	names := make([]string, par)
	for g := range names {
		names[g] = name(g)
	}
	lats, errs, el := timedCycles(ctx, l, par, d, count, func(g int) string { return names[g] })
	n := int64(len(lats))
	r := semCycleResult{Ops: n, Seconds: el, OpsPerSec: float64(n) / el, Lat: summarize(lats), Errors: errs}
	r.NsPerOp = 1e9 * float64(par) / r.OpsPerSec
	return r
}

// semHandoffOnce keeps a semaphore of n permits full with g goroutines on
// one name, half on each of two clients: n hold, the others wait in
// acquire. A coordinator tells the longest holder to release, waits for a
// waiter's acquire to return, and only then lets the releaser try again, so
// every handoff is from a release to a waiter that was waiting, one at a
// time: the time between is exactly the release's handoff.
func semHandoffOnce(ctx context.Context, im semImpl, addr string, n, g int, d time.Duration, name string) (semHandoffResult, error) {
	r := semHandoffResult{Impl: im.Name, Goroutines: g}
	lockers, hooks, done, err := lockerPair(addr, g, func(c *redis.Client) (locker, error) { return im.new(c, []string{name}) })
	if err != nil {
		return r, err
	}
	defer done()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := newSemHandoffRun(name, g)
	var wg sync.WaitGroup
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.hold(runCtx, lockers[i%2], i)
		}()
	}
	err = h.coordinate(n, d, hooks, &r)
	r.CmdsPerHand = float64(hooks[0].cmds.Load()+hooks[1].cmds.Load()) / float64(max(len(h.handoffs), 1))
	cancel()
	wg.Wait()
	h.result(&r)
	if r.Errors > 0 {
		return r, fmt.Errorf("%d errors, the first: %w", r.Errors, *h.firstErr.Load())
	}
	return r, err
}

// semReleaseWithin bounds a release call, and the wait for a waiter to
// take the permit it freed.
const semReleaseWithin = 5 * time.Second

// A handoffEvent is goroutine who's acquire returning at at.
type handoffEvent struct {
	who int
	at  time.Time
}

// semHandoffRun is one semHandoffOnce as its goroutines and its coordinator
// see it.
type semHandoffRun struct {
	name          string
	events        chan handoffEvent
	ctl           []chan struct{} // the coordinator's word to each goroutine
	live, maxLive atomic.Int64
	errs          atomic.Int64
	firstErr      atomic.Pointer[error]
	relSent       atomic.Int64 // UnixNano when the last release was sent
	relLat        [][]time.Duration
	measuring     atomic.Bool
	handoffs      []time.Duration // the coordinator's
}

func newSemHandoffRun(name string, g int) *semHandoffRun {
	h := &semHandoffRun{name: name, events: make(chan handoffEvent, 2*g), ctl: make([]chan struct{}, g), relLat: make([][]time.Duration, g)}
	for i := range h.ctl {
		h.ctl[i] = make(chan struct{}, 2)
	}
	return h
}

func (h *semHandoffRun) fail(err error) {
	h.errs.Add(1)
	h.firstErr.CompareAndSwap(nil, &err)
}

// releaseDetached releases with a context of its own: the run's may have
// ended.
func releaseDetached(rel func(context.Context) error) error {
	c, cancel := context.WithTimeout(context.Background(), semReleaseWithin)
	defer cancel()
	return rel(c)
}

// hold is goroutine i: acquire, say so, release when told, then wait to be
// told again before acquiring again.
func (h *semHandoffRun) hold(ctx context.Context, l locker, i int) {
	for {
		rel, err := l.acquire(ctx, h.name)
		if err != nil {
			if ctx.Err() == nil {
				h.fail(err)
			}
			return
		}
		got := time.Now()
		now := h.live.Add(1)
		for m := h.maxLive.Load(); now > m && !h.maxLive.CompareAndSwap(m, now); m = h.maxLive.Load() {
		}
		h.events <- handoffEvent{i, got}
		select {
		case <-h.ctl[i]:
		case <-ctx.Done():
			h.live.Add(-1)
			if err := releaseDetached(rel); err != nil {
				h.fail(err)
			}
			return
		}
		h.live.Add(-1)
		t0 := time.Now()
		h.relSent.Store(t0.UnixNano())
		err = releaseDetached(rel)
		if h.measuring.Load() {
			h.relLat[i] = append(h.relLat[i], time.Since(t0))
		}
		if err != nil {
			h.fail(err)
			return
		}
		// Wait until a waiter holds the permit: the releaser
		// does not race the waiters for it.
		select {
		case <-h.ctl[i]:
		case <-ctx.Done():
			return
		}
	}
}

// next is the next acquisition to return.
func (h *semHandoffRun) next() (handoffEvent, error) {
	t := time.NewTimer(semReleaseWithin)
	defer t.Stop()
	select {
	case ev := <-h.events:
		return ev, nil
	case <-t.C:
		return handoffEvent{}, fmt.Errorf("no acquisition within %v", semReleaseWithin)
	}
}

// coordinate waits for the first n holders, then for d hands the permits
// on one at a time, and sets r.Seconds to how long it did.
func (h *semHandoffRun) coordinate(n int, d time.Duration, hooks [2]*counter, r *semHandoffResult) error {
	var holders []int
	for len(holders) < n {
		ev, err := h.next()
		if err != nil {
			return err
		}
		holders = append(holders, ev.who)
	}
	// Let the others find the semaphore full and wait.
	time.Sleep(20 * time.Millisecond)
	hooks[0].reset()
	hooks[1].reset()
	h.measuring.Store(true)
	start := time.Now()
	var err error
	for time.Since(start) < d && h.errs.Load() == 0 {
		longest := holders[0]
		holders = holders[1:]
		h.ctl[longest] <- struct{}{}
		ev, e := h.next()
		if e != nil {
			err = fmt.Errorf("a permit was released and %w", e)
			break
		}
		h.handoffs = append(h.handoffs, ev.at.Sub(time.Unix(0, h.relSent.Load())))
		holders = append(holders, ev.who)
		h.ctl[longest] <- struct{}{}
	}
	r.Seconds = time.Since(start).Seconds()
	h.measuring.Store(false)
	return err
}

// result sums what the goroutines and the coordinator recorded into r.
func (h *semHandoffRun) result(r *semHandoffResult) {
	var rels []time.Duration
	for _, l := range h.relLat {
		rels = append(rels, l...)
	}
	r.Handoffs = int64(len(h.handoffs))
	if r.Seconds > 0 {
		r.PerSec = float64(r.Handoffs) / r.Seconds
	}
	r.Handoff, r.Release = summarize(h.handoffs), summarize(rels)
	if r.Release.P50 > 0 {
		r.P50Trips = float64(r.Handoff.P50) / float64(r.Release.P50)
		r.P99Trips = float64(r.Handoff.P99) / float64(r.Release.P50)
	}
	r.MaxLive = h.maxLive.Load()
	r.Errors = h.errs.Load()
}

// rwMixOnce runs readers and writers of one tenure read-write lock at once
// and counts, as each gets its lock, who else holds it: a writer must find
// nobody, a reader no writer. Readers hold for a moment so that they
// overlap one another; writers pause between locks so that readers get in.
func rwMixOnce(ctx context.Context, addr string, g, writers int, d time.Duration, name string) (rwMixResult, error) {
	r := rwMixResult{Goroutines: g, Writers: writers}
	var ks [2]*rwlock.Locker
	for i := range ks {
		c, _ := newClient(addr, g/2+2)
		defer c.Close()
		m, err := newManager(c)
		if err != nil {
			return r, err
		}
		defer m.Close()
		ks[i] = rwlock.New(m)
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	mix := &rwMix{name: name}
	var wg sync.WaitGroup
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mix.use(runCtx, ks[i%2], i < writers)
		}()
	}
	wg.Wait()
	r.Seconds = d.Seconds()
	r.Reads, r.Writes, r.MaxReaders, r.Overlaps = mix.reads.Load(), mix.writes.Load(), mix.maxReaders.Load(), mix.overlaps.Load()
	if errs := mix.errs.Load(); errs > 0 {
		return r, fmt.Errorf("%d errors, the first: %w", errs, *mix.firstErr.Load())
	}
	return r, nil
}

// rwMix is what rwMixOnce's goroutines count together.
type rwMix struct {
	name                         string
	readers, writing, maxReaders atomic.Int64
	reads, writes, overlaps      atomic.Int64
	errs                         atomic.Int64
	firstErr                     atomic.Pointer[error]
}

func (m *rwMix) fail(err error) {
	m.errs.Add(1)
	m.firstErr.CompareAndSwap(nil, &err)
}

// use is one goroutine: lock (a write lock if write) and release until ctx
// ends, counting on each lock who else holds it.
func (m *rwMix) use(ctx context.Context, k *rwlock.Locker, write bool) {
	for ctx.Err() == nil {
		lock, mine, other := k.RLock, &m.readers, &m.writing
		if write {
			lock, mine, other = k.Lock, &m.writing, &m.readers
		}
		l, err := lock(ctx, m.name)
		if err != nil {
			if ctx.Err() == nil {
				m.fail(err)
			}
			return
		}
		now := mine.Add(1)
		if other.Load() > 0 || (write && now > 1) {
			m.overlaps.Add(1)
		}
		if write {
			m.writes.Add(1)
		} else {
			m.reads.Add(1)
			for most := m.maxReaders.Load(); now > most && !m.maxReaders.CompareAndSwap(most, now); most = m.maxReaders.Load() {
			}
			time.Sleep(200 * time.Microsecond)
		}
		mine.Add(-1)
		relCtx, relCancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = l.Release(relCtx)
		relCancel()
		if err != nil {
			m.fail(err)
			return
		}
		if write {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// semCycleMedian is the median over runs of one variant of scenario 7's
// cycle at one parallelism.
type semCycleMedian struct {
	impl, base                    string
	par                           int
	ops, opsLo, opsHi             float64
	trips, allocs, redisUs, cpuUs float64
	p50, p99                      time.Duration
}

func semCycleMedians(s *semaphoreResults) []semCycleMedian {
	var out []semCycleMedian
	for _, par := range group(s.Cycle, func(c semCycleResult) int { return c.Goroutines }) {
		for _, im := range group(s.Cycle, func(c semCycleResult) string { return c.Impl }) {
			rs := filter(s.Cycle, func(c semCycleResult) bool { return c.Impl == im && c.Goroutines == par })
			ops := make([]float64, len(rs))
			for i, c := range rs {
				ops[i] = c.OpsPerSec
			}
			lo, hi := minMax(ops)
			out = append(out, semCycleMedian{
				impl: im, base: rs[0].Base, par: par, ops: median(ops), opsLo: lo, opsHi: hi,
				trips:   medianOf(rs, func(c semCycleResult) float64 { return c.TripsPerOp }),
				allocs:  medianOf(rs, func(c semCycleResult) float64 { return c.AllocsOp }),
				redisUs: medianOf(rs, func(c semCycleResult) float64 { return c.RedisUsOp }),
				cpuUs:   medianOf(rs, func(c semCycleResult) float64 { return c.CPUUsOp }),
				p50:     time.Duration(medianOf(rs, func(c semCycleResult) float64 { return float64(c.Lat.P50) })),
				p99:     time.Duration(medianOf(rs, func(c semCycleResult) float64 { return float64(c.Lat.P99) })),
			})
		}
	}
	return out
}

func semaphoreSection(b *strings.Builder, s *semaphoreResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## 7. Semaphores and read-write locks\n\n")
	semCycleTable(p, s)
	semHandoffTable(p, s)
	semRWTable(p, s)
	p("\nVariants:\n\n")
	names := make([]string, 0, len(s.Notes))
	for n := range s.Notes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p("- `%s`: %s\n", n, s.Notes[n])
	}
}

// semCycleTable is the cycle's description and table, its ratios taken
// within each run.
func semCycleTable(p func(string, ...any), s *semaphoreResults) {
	p("**Cycle.** Acquire and release in a loop from 1 and 32 goroutines on one client (pool of 36), each variant on a client of its own. ")
	p("Permits (n=%d) and read locks: goroutine g cycles on name g mod %d, so at 32 goroutines two share each name, at most two of its %d permits are held and nobody waits. ", s.N, s.Names, s.N)
	p("Write locks and leases: a name per goroutine. Time ÷ baseline divides this variant's time per cycle by its baseline's in the same run (permits and read locks by the baseline permit, write locks and leases by the baseline lease); ")
	p("÷ tenure lease by tenure's plain lease. Allocations are the whole process's heap allocations (runtime.MemStats.Mallocs) per cycle; ")
	p("Redis µs/cycle is INFO commandstats' usec for the commands the client sent (a script's usec includes what it calls), after CONFIG RESETSTAT; Redis CPU/cycle is INFO cpu.\n\n")
	ms := semCycleMedians(s)
	p("The ratios are medians over runs of the ratio within each run (range in brackets), so that the machine's drift between runs stays out of them; cycles/s, latencies and costs are medians over runs.\n\n")
	p("| goroutines | variant | cycles/s (min–max) | p50 | p99 | round trips/cycle | allocs/cycle | Redis µs/cycle (commandstats) | Redis CPU/cycle | time ÷ baseline (range) | time ÷ tenure lease |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range ms {
		vsBase, lo, hi := semPerRun(s.Cycle, m, m.base)
		vsLease, _, _ := semPerRun(s.Cycle, m, "tenure lease")
		p("| %d | %s | %.0f (%.0f–%.0f) | %s | %s | %.2f | %.0f | %.1f | %.1fµs | %s (%s–%s) ÷ %s | %s |\n", m.par, m.impl, m.ops, m.opsLo, m.opsHi, dur(m.p50), dur(m.p99), m.trips, m.allocs, m.redisUs, m.cpuUs, ratio(vsBase), ratio(lo), ratio(hi), m.base, ratio(vsLease))
	}
}

// semPerRun is the median over runs of m's time ÷ other's in the same run,
// and its range: drift of the machine between runs, which the interleaving
// does not cancel, stays out of it.
func semPerRun(cycles []semCycleResult, m semCycleMedian, other string) (med, lo, hi float64) {
	var rs []float64
	for _, c := range cycles {
		if c.Impl != m.impl || c.Goroutines != m.par {
			continue
		}
		for _, o := range cycles {
			if o.Impl == other && o.Goroutines == c.Goroutines && o.Run == c.Run && c.OpsPerSec > 0 {
				rs = append(rs, o.OpsPerSec/c.OpsPerSec)
			}
		}
	}
	lo, hi = minMax(rs)
	return median(rs), lo, hi
}

// semHandoffTable is the handoff's description and table.
func semHandoffTable(p func(string, ...any), s *semaphoreResults) {
	p("\n**Handoff.** A semaphore of %d permits kept full by N goroutines on one name, half on each of two clients: %d hold, the rest wait in acquire. ", s.N, s.N)
	p("A coordinator tells the longest holder to release, waits for a waiter's acquire to return, then lets the releaser wait again: one release at a time, each taken by a waiter that was waiting. ")
	p("Release → holder is the time from the holder sending its release to the waiter's acquire returning; it is also given in round trips of the release call itself, measured in the same run ")
	p("(a waiter woken by a message needs about 2: the release, then its winning attempt). Commands/handoff counts everything both clients sent, the woken waiters' tries included. ")
	p("Max live = the most permits held at once, counted from acquire returning to release being sent; the run fails if it is ever above %d.\n\n", s.N)
	p("| goroutines | implementation | handoffs/s | release → holder p50 | p99 | release p50 | p50 in release round trips | p99 in release round trips | commands/handoff | max live |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range group(s.Handoff, func(h semHandoffResult) int { return h.Goroutines }) {
		for _, im := range group(s.Handoff, func(h semHandoffResult) string { return h.Impl }) {
			rs := filter(s.Handoff, func(h semHandoffResult) bool { return h.Impl == im && h.Goroutines == g })
			var live int64
			for _, h := range rs {
				live = max(live, h.MaxLive)
			}
			p("| %d | %s | %.0f | %s | %s | %s | %.1f | %.1f | %.1f | %d |\n", g, im,
				medianOf(rs, func(h semHandoffResult) float64 { return h.PerSec }),
				dur(time.Duration(medianOf(rs, func(h semHandoffResult) float64 { return float64(h.Handoff.P50) }))),
				dur(time.Duration(medianOf(rs, func(h semHandoffResult) float64 { return float64(h.Handoff.P99) }))),
				dur(time.Duration(medianOf(rs, func(h semHandoffResult) float64 { return float64(h.Release.P50) }))),
				medianOf(rs, func(h semHandoffResult) float64 { return h.P50Trips }),
				medianOf(rs, func(h semHandoffResult) float64 { return h.P99Trips }),
				medianOf(rs, func(h semHandoffResult) float64 { return h.CmdsPerHand }), live)
		}
	}
}

// semRWTable is the read-write mix's description and table, a row a run.
func semRWTable(p func(string, ...any), s *semaphoreResults) {
	p("\n**Read-write safety.** Readers and writers of one tenure read-write lock at once (two managers; readers hold 200µs, writers pause 2ms between locks). ")
	p("Each counts, on getting its lock, who else holds it; a writer finding anyone, or a reader finding a writer, is an overlap, and the run fails.\n\n")
	p("| run | goroutines | writers | seconds | reads | writes | most readers at once | overlaps |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range s.RWMix {
		p("| %d | %d | %d | %.1f | %d | %d | %d | %d |\n", m.Run, m.Goroutines, m.Writers, m.Seconds, m.Reads, m.Writes, m.MaxReaders, m.Overlaps)
	}
}
