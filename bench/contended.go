package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario 2: goroutines on one name across two managers (two pools), each
// holding for zero time; what a waiter feels.

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
		tenureImpl(),
		redsyncImpl(0), redsyncImpl(time.Millisecond),
		redislockImpl(100 * time.Millisecond), redislockImpl(time.Millisecond),
		baselineImpl(),
	}
}

func runContended(ctx context.Context, cfg runConfig, addr string) ([]contendedResult, error) {
	impls := contendedImpls()
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

func contendOnce(ctx context.Context, im impl, addr string, g int, d time.Duration, name string) (contendedResult, error) {
	r := contendedResult{Impl: im.Name, Goroutines: g}
	var lockers [2]locker
	var hooks [2]*counter
	for i := range lockers {
		c, h := newClient(addr, g/2+2)
		defer c.Close()
		l, err := im.new(c, 10*time.Second)
		if err != nil {
			return r, err
		}
		defer l.close()
		lockers[i], hooks[i] = l, h
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		inside, overlaps, errs, handoffs atomic.Int64
		firstErr                         atomic.Pointer[error]
		last                             atomic.Int64
		relSent                          atomic.Int64 // UnixNano when the holder sent its release
		counts                           = make([]int64, g)
		handoffLat                       = make([][]time.Duration, g)
		releaseLat                       = make([][]time.Duration, g)
		waits                            = make([][]time.Duration, g)
		pending                          = make([]time.Duration, g)
		wg                               sync.WaitGroup
	)
	last.Store(-1)
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lockers[i%2]
			for runCtx.Err() == nil {
				t0 := time.Now()
				rel, err := l.acquire(runCtx, name)
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
					pending[i] = time.Since(t0)
					return
				}
				got := time.Now()
				w := got.Sub(t0)
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				var handoff time.Duration
				if last.Swap(int64(i)) != int64(i) {
					handoffs.Add(1)
					if sent := relSent.Load(); sent != 0 {
						handoff = got.Sub(time.Unix(0, sent))
					}
				}
				// Stored while holding, before the release is sent: the
				// next holder's acquire returns after it.
				r0 := time.Now()
				relSent.Store(r0.UnixNano())
				inside.Add(-1)
				// Release with a fresh context: the run's may just have ended.
				relCtx, relCancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := rel(relCtx); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
				relCancel()
				rt := time.Since(r0)
				if runCtx.Err() != nil && time.Since(start) > d {
					// Finished after the end: do not count it.
					return
				}
				counts[i]++
				waits[i] = append(waits[i], w)
				releaseLat[i] = append(releaseLat[i], rt)
				if handoff > 0 {
					handoffLat[i] = append(handoffLat[i], handoff)
				}
			}
		}()
	}
	wg.Wait()
	el := d.Seconds()
	var all, hand, rels []time.Duration
	var total, busiest int64
	for i := range g {
		all = append(all, waits[i]...)
		hand = append(hand, handoffLat[i]...)
		rels = append(rels, releaseLat[i]...)
		total += counts[i]
		busiest = max(busiest, counts[i])
		if counts[i] == 0 {
			r.Starved++
		}
		r.MaxWait = max(r.MaxWait, pending[i])
	}
	r.Seconds = el
	r.Acqs = total
	r.AcqPerSec = float64(total) / el
	r.HandoffsSec = float64(handoffs.Load()) / el
	r.Wait = summarize(all)
	r.Handoff, r.Release = summarize(hand), summarize(rels)
	if r.Release.P50 > 0 {
		r.HandoffTrips = float64(r.Handoff.P50) / float64(r.Release.P50)
	}
	r.MaxWait = max(r.MaxWait, r.Wait.Max)
	if total > 0 {
		r.BusiestShare = float64(busiest) / float64(total)
		r.CmdsPerAcq = float64(hooks[0].cmds.Load()+hooks[1].cmds.Load()) / float64(total)
	}
	r.Errors = errs.Load()
	r.Overlaps = overlaps.Load()
	if r.Errors > 0 {
		return r, fmt.Errorf("%d errors while contending, the first: %w", r.Errors, *firstErr.Load())
	}
	return r, nil
}
