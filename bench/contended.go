package main

// Scenario 2, contended handoff: 8 and 32 goroutines on one name, half on
// each of two managers (two clients, two pools), each releasing as soon as
// it holds: what a waiter feels. tenure (Manager.Acquire, woken by the
// release message) against redsync and redislock at their default retry
// settings and at 1ms, and the baseline spinning on SET NX (the upper bound
// of handoffs, not a sensible way to wait). It measures acquisitions and
// handoffs (an acquisition by another goroutine than the previous holder) a
// second, the time inside acquire, how fair it is (the busiest goroutine's
// share, starved goroutines), commands per acquisition, and the time from a
// release to the next holder; two holders at once fail the run (plots:
// contended.png, contended_wait.png).

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

type contendedResult struct {
	Impl        string
	Goroutines  int
	Run         int
	Seconds     float64
	Acqs        int64
	AcqPerSec   float64
	HandoffsSec float64 // acquisitions by a goroutine other than the previous holder, per second
	Wait        latencySummary
	// MaxWait includes waits still unfinished at the end of the run (a
	// starved waiter), which Wait.Max, over completed acquisitions, misses.
	MaxWait      time.Duration
	BusiestShare float64 // the busiest goroutine's share of acquisitions
	Starved      int     // goroutines with no acquisition in the run
	CmdsPerAcq   float64
	// Handoff is, for each handoff, the time from the moment the previous
	// holder sent its release to the moment the next holder's acquire
	// returned; Release is the release call's own round trip, the unit
	// HandoffTrips counts in (handoff p50 ÷ release p50): 2 is the floor
	// of a waiter woken by a message (the release, then its winning attempt).
	Handoff      latencySummary
	Release      latencySummary
	HandoffTrips float64
	Errors       int64
	Overlaps     int64 // two holders at once: must be 0
}

func contendedImpls() []impl {
	return []impl{
		tenureImpl(), redissonImpl(),
		redsyncImpl(0), redsyncImpl(time.Millisecond),
		redislockImpl(100 * time.Millisecond), redislockImpl(time.Millisecond),
		baselineImpl(),
	}
}

// isContendedImpl reports whether scenario 2 has an implementation named
// name.
func isContendedImpl(name string) bool {
	for _, im := range contendedImpls() {
		if im.Name == name {
			return true
		}
	}
	return false
}

func runContended(ctx context.Context, cfg runConfig, addr string) ([]contendedResult, error) {
	impls := contendedImpls()
	if cfg.contendedOnly != nil {
		impls = slices.DeleteFunc(impls, func(im impl) bool { return !cfg.contendedOnly[im.Name] })
	}
	var out []contendedResult
	for run := range cfg.runs {
		for _, g := range []int{8, 32} {
			for k := range impls {
				im := impls[(k+run)%len(impls)]
				r, err := contendOnce(ctx, im, addr, g, cfg.contendDur, fmt.Sprintf("contended-%d-%d-%s", run, g, im.Name))
				if err != nil {
					return out, fmt.Errorf("contended %s g=%d: %w", im.Name, g, err)
				}
				r.Run = run
				out = append(out, r)
				cfg.logf("  contended run %d %-15s g=%-2d %7.0f acq/s %7.0f handoffs/s  wait p50 %-9v p99 %-9v max %-9v busiest %.2f  %.1f cmds/acq  handoff p50 %v (%.1f release round trips)",
					run, im.Name, g, r.AcqPerSec, r.HandoffsSec, r.Wait.P50.Round(time.Microsecond), r.Wait.P99.Round(time.Microsecond), r.MaxWait.Round(time.Millisecond), r.BusiestShare, r.CmdsPerAcq, r.Handoff.P50.Round(time.Microsecond), r.HandoffTrips)
				if r.Overlaps > 0 {
					return out, fmt.Errorf("contended %s: %d overlapping holders", im.Name, r.Overlaps)
				}
			}
		}
	}
	return out, nil
}

// contendOnce runs g goroutines on one name for d, half on each of two
// lockers of im.
func contendOnce(ctx context.Context, im impl, addr string, g int, d time.Duration, name string) (contendedResult, error) {
	r := contendedResult{Impl: im.Name, Goroutines: g}
	lockers, hooks, done, err := lockerPair(addr, g, func(c *redis.Client) (locker, error) { return im.new(c, 10*time.Second) })
	if err != nil {
		return r, err
	}
	defer done()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c := newContention(name, g, d)
	var wg sync.WaitGroup
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.contend(runCtx, lockers[i%2], i)
		}()
	}
	wg.Wait()
	c.result(&r, hooks[0].cmds.Load()+hooks[1].cmds.Load())
	if r.Errors > 0 {
		return r, fmt.Errorf("%d errors while contending, the first: %w", r.Errors, *c.firstErr.Load())
	}
	return r, nil
}

// contention is one contendOnce as its goroutines see it: what they count
// together, and what each records in its own slot.
type contention struct {
	name                             string
	d                                time.Duration
	start                            time.Time
	inside, overlaps, errs, handoffs atomic.Int64
	firstErr                         atomic.Pointer[error]
	last                             atomic.Int64 // the goroutine that held last
	relSent                          atomic.Int64 // UnixNano when the holder sent its release
	counts                           []int64
	handoffLat, releaseLat, waits    [][]time.Duration
	pending                          []time.Duration // a wait still unfinished when the run ended
}

func newContention(name string, g int, d time.Duration) *contention {
	c := &contention{name: name, d: d, counts: make([]int64, g), pending: make([]time.Duration, g),
		handoffLat: make([][]time.Duration, g), releaseLat: make([][]time.Duration, g), waits: make([][]time.Duration, g)}
	c.last.Store(-1)
	c.start = time.Now()
	return c
}

func (c *contention) fail(err error) {
	c.errs.Add(1)
	c.firstErr.CompareAndSwap(nil, &err)
}

// contend is goroutine i: acquire, release at once, until ctx ends.
func (c *contention) contend(ctx context.Context, l locker, i int) {
	for ctx.Err() == nil {
		t0 := time.Now()
		rel, err := l.acquire(ctx, c.name)
		if err != nil {
			if ctx.Err() == nil {
				c.fail(err)
			}
			c.pending[i] = time.Since(t0)
			return
		}
		got := time.Now()
		handoff := c.took(i, got)
		rt := c.release(rel)
		if ctx.Err() != nil && time.Since(c.start) > c.d {
			// Finished after the end: do not count it.
			return
		}
		c.counts[i]++
		c.waits[i] = append(c.waits[i], got.Sub(t0))
		c.releaseLat[i] = append(c.releaseLat[i], rt)
		if handoff > 0 {
			c.handoffLat[i] = append(c.handoffLat[i], handoff)
		}
	}
}

// took notes that goroutine i holds the name since got: an overlap if
// another holds it too, and a handoff, with the time since the release
// that allowed it, if another held it last.
func (c *contention) took(i int, got time.Time) (handoff time.Duration) {
	if c.inside.Add(1) != 1 {
		c.overlaps.Add(1)
	}
	if c.last.Swap(int64(i)) != int64(i) {
		c.handoffs.Add(1)
		if sent := c.relSent.Load(); sent != 0 {
			handoff = got.Sub(time.Unix(0, sent))
		}
	}
	return handoff
}

// release calls rel and returns its round trip.
func (c *contention) release(rel func(context.Context) error) time.Duration {
	// Stored while holding, before the release is sent: the next holder's
	// acquire returns after it.
	r0 := time.Now()
	c.relSent.Store(r0.UnixNano())
	c.inside.Add(-1)
	// Release with a fresh context: the run's may just have ended.
	relCtx, relCancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := rel(relCtx); err != nil {
		c.fail(err)
	}
	relCancel()
	return time.Since(r0)
}

// result sums the goroutines' records into r; cmds is what both clients
// sent.
func (c *contention) result(r *contendedResult, cmds int64) {
	el := c.d.Seconds()
	var all, hand, rels []time.Duration
	var total, busiest int64
	for i := range c.counts {
		all = append(all, c.waits[i]...)
		hand = append(hand, c.handoffLat[i]...)
		rels = append(rels, c.releaseLat[i]...)
		total += c.counts[i]
		busiest = max(busiest, c.counts[i])
		if c.counts[i] == 0 {
			r.Starved++
		}
		r.MaxWait = max(r.MaxWait, c.pending[i])
	}
	r.Seconds = el
	r.Acqs = total
	r.AcqPerSec = float64(total) / el
	r.HandoffsSec = float64(c.handoffs.Load()) / el
	r.Wait = summarize(all)
	r.Handoff, r.Release = summarize(hand), summarize(rels)
	if r.Release.P50 > 0 {
		r.HandoffTrips = float64(r.Handoff.P50) / float64(r.Release.P50)
	}
	r.MaxWait = max(r.MaxWait, r.Wait.Max)
	if total > 0 {
		r.BusiestShare = float64(busiest) / float64(total)
		r.CmdsPerAcq = float64(cmds) / float64(total)
	}
	r.Errors = c.errs.Load()
	r.Overlaps = c.overlaps.Load()
}

type contendedMedian struct {
	impl          string
	g             int
	acq, handoffs float64
	p50, p99, max time.Duration
	worstMax      time.Duration
	busiest, cmds float64
	starved       float64
	handoff       time.Duration // release sent -> next holder, p50
	trips         float64       // handoff p50 in release round trips
}

func contendedMedians(r *results) []contendedMedian {
	var out []contendedMedian
	for _, g := range group(r.Contended, func(c contendedResult) int { return c.Goroutines }) {
		for _, im := range group(r.Contended, func(c contendedResult) string { return c.Impl }) {
			rs := filter(r.Contended, func(c contendedResult) bool { return c.Impl == im && c.Goroutines == g })
			var worst time.Duration
			for _, c := range rs {
				worst = max(worst, c.MaxWait)
			}
			out = append(out, contendedMedian{
				impl: im, g: g,
				acq:      medianOf(rs, func(c contendedResult) float64 { return c.AcqPerSec }),
				handoffs: medianOf(rs, func(c contendedResult) float64 { return c.HandoffsSec }),
				p50:      time.Duration(medianOf(rs, func(c contendedResult) float64 { return float64(c.Wait.P50) })),
				p99:      time.Duration(medianOf(rs, func(c contendedResult) float64 { return float64(c.Wait.P99) })),
				max:      time.Duration(medianOf(rs, func(c contendedResult) float64 { return float64(c.MaxWait) })),
				worstMax: worst,
				busiest:  medianOf(rs, func(c contendedResult) float64 { return c.BusiestShare }),
				cmds:     medianOf(rs, func(c contendedResult) float64 { return c.CmdsPerAcq }),
				starved:  medianOf(rs, func(c contendedResult) float64 { return float64(c.Starved) }),
				handoff:  time.Duration(medianOf(rs, func(c contendedResult) float64 { return float64(c.Handoff.P50) })),
				trips:    medianOf(rs, func(c contendedResult) float64 { return c.HandoffTrips }),
			})
		}
	}
	return out
}

func contendedSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## 2. Contended handoff\n\n")
	p("N goroutines loop on one name, half on each of two managers (two clients, two pools); each releases as soon as it holds. ")
	p("A handoff is an acquisition by a goroutine other than the previous holder. Wait = time inside the implementation's acquire until it holds; ")
	p("max wait includes waits still unfinished when the run ended (a starving waiter). Busiest = the busiest goroutine's share of all acquisitions (fair: 1/N). ")
	p("Commands/acquisition counts every command both clients sent (go-redis hook), releases included; the floor is 2 (one acquire, one release). ")
	p("Release → next holder is, for each handoff, the time from the previous holder sending its release to the next holder's acquire returning; ")
	p("its p50 is also given in round trips of the release call itself, measured in the same run (the floor for a waiter woken by a message is 2: the release, then the winning attempt). ")
	p("tenure waits for the release message on the name's channel (docs/design.md section 5), barging: the releaser may take the name again before the woken waiter tries.\n\n")
	ms := contendedMedians(r)
	p("| goroutines | implementation | acq/s | handoffs/s | wait p50 | wait p99 | max wait (median / worst run) | busiest share | starved goroutines | commands/acq | release → next holder p50 | in release round trips |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range ms {
		p("| %d | %s | %.0f | %.0f | %s | %s | %s / %s | %.2f | %.0f | %.1f | %s | %.1f |\n", m.g, m.impl, m.acq, m.handoffs, dur(m.p50), dur(m.p99), dur(m.max), dur(m.worstMax), m.busiest, m.starved, m.cmds, dur(m.handoff), m.trips)
	}
	p("\n![contended](contended.png)\n\n")
}

// contendedPlots draws handoffs a second (contended.png) and the waiters'
// p99 wait (contended_wait.png), a bar per implementation and count of
// goroutines.
func contendedPlots(r *results, dir string) error {
	ms := contendedMedians(r)
	get := func(f func(contendedMedian) float64) func(string, int) float64 {
		return func(impl string, g int) float64 {
			for _, m := range ms {
				if m.impl == impl && m.g == g {
					return f(m)
				}
			}
			return 0
		}
	}
	impls := group(ms, func(m contendedMedian) string { return m.impl })
	gs := group(ms, func(m contendedMedian) int { return m.g })
	if err := groupedBars(filepath.Join(dir, "contended.png"), "Contended: handoffs to another goroutine (median)", "handoffs/s",
		impls, gs, "goroutines", get(func(m contendedMedian) float64 { return m.handoffs })); err != nil {
		return err
	}
	return groupedBars(filepath.Join(dir, "contended_wait.png"), "Contended: waiter's p99 time in acquire (median)", "ms",
		impls, gs, "goroutines", get(func(m contendedMedian) float64 { return float64(m.p99) / 1e6 }))
}
