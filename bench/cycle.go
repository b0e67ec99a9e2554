package main

// Scenario 1, the uncontended cycle: acquire and release of a fresh name, in
// a loop, from 1 and 32 goroutines on one client. tenure (Manager.Acquire)
// against redsync, redislock and the raw baseline (SET NX PX, then a
// compare-and-delete script: the round trips any token-safe lease needs).
// It measures cycles a second, latency, round trips per cycle (a go-redis
// hook) and Redis CPU per cycle (INFO cpu); the report divides each
// implementation's time per cycle by the baseline's and by tenure's
// (cycle.png).

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
)

type cycleResult struct {
	Impl       string
	Goroutines int
	Run        int
	Ops        int64
	Seconds    float64
	OpsPerSec  float64
	NsPerOp    float64 // wall time per cycle per goroutine: 1e9*goroutines/opsPerSec
	TripsPerOp float64
	RedisUsOp  float64 // server CPU per cycle, µs (INFO cpu)
	Lat        latencySummary
	Errors     int64
}

func runCycles(ctx context.Context, cfg runConfig, addr string) ([]cycleResult, error) {
	impls := []impl{tenureImpl(), redissonImpl(), redsyncImpl(0), redislockImpl(0), baselineImpl()}
	type built struct {
		impl
		l locker
		h *counter
		c interface{ Close() error }
	}
	var bs []built
	defer func() {
		for _, b := range bs {
			_ = b.l.close()
			_ = b.c.Close()
		}
	}()
	for _, im := range impls {
		c, h := newClient(addr, 36)
		l, err := im.new(c, 10*time.Second)
		if err != nil {
			return nil, err
		}
		bs = append(bs, built{im, l, h, c})
	}
	admin, _ := newClient(addr, 1)
	defer admin.Close()
	var seq atomic.Int64
	var out []cycleResult
	for run := range cfg.runs {
		for _, par := range []int{1, 32} {
			// Rotate the order each run so drift of the machine hits all alike.
			for k := range bs {
				b := bs[(k+run)%len(bs)]
				// Warm up: scripts loaded, pool busy.
				_ = cycleLoop(ctx, b.l, par, 0, 64, &seq)
				b.h.reset()
				rc := redisCPU(ctx, admin)
				r := cycleLoop(ctx, b.l, par, cfg.cycleDur, 0, &seq)
				r.RedisUsOp = (redisCPU(ctx, admin) - rc) * 1e6 / float64(max(r.Ops, 1))
				r.Impl, r.Goroutines, r.Run = b.Name, par, run
				r.TripsPerOp = float64(b.h.trips.Load()) / float64(max(r.Ops, 1))
				out = append(out, r)
				cfg.logf("  cycle run %d %-10s g=%-2d %8.0f ops/s  %.2f trips/op  redis %.1fµs/op  p50 %v", run, b.Name, par, r.OpsPerSec, r.TripsPerOp, r.RedisUsOp, r.Lat.P50)
				if r.Errors > 0 {
					return out, fmt.Errorf("cycle %s: %d errors", b.Name, r.Errors)
				}
			}
		}
	}
	return out, nil
}

// cycleLoop runs acquire+release of fresh names from par goroutines for d
// (or, if d is 0, count cycles in all).
func cycleLoop(ctx context.Context, l locker, par int, d time.Duration, count int64, seq *atomic.Int64) cycleResult {
	lats, errs, el := timedCycles(ctx, l, par, d, count, func(int) string { return fmt.Sprint("cycle-", seq.Add(1)) })
	n := int64(len(lats))
	r := cycleResult{Ops: n, Seconds: el, OpsPerSec: float64(n) / el, Lat: summarize(lats), Errors: errs}
	r.NsPerOp = 1e9 * float64(par) / r.OpsPerSec
	return r
}

// cycleMedian is the median over runs of one implementation at one
// parallelism.
type cycleMedian struct {
	impl         string
	par          int
	ops, ns      float64
	trips        float64
	redisUs      float64
	p50, p99     time.Duration
	opsLo, opsHi float64
}

func cycleMedians(r *results) []cycleMedian {
	var out []cycleMedian
	for _, par := range group(r.Cycle, func(c cycleResult) int { return c.Goroutines }) {
		for _, im := range group(r.Cycle, func(c cycleResult) string { return c.Impl }) {
			rs := filter(r.Cycle, func(c cycleResult) bool { return c.Impl == im && c.Goroutines == par })
			ops := make([]float64, len(rs))
			for i, c := range rs {
				ops[i] = c.OpsPerSec
			}
			lo, hi := minMax(ops)
			out = append(out, cycleMedian{
				impl: im, par: par, ops: median(ops),
				ns:      medianOf(rs, func(c cycleResult) float64 { return c.NsPerOp }),
				trips:   medianOf(rs, func(c cycleResult) float64 { return c.TripsPerOp }),
				redisUs: medianOf(rs, func(c cycleResult) float64 { return c.RedisUsOp }),
				p50:     time.Duration(medianOf(rs, func(c cycleResult) float64 { return float64(c.Lat.P50) })),
				p99:     time.Duration(medianOf(rs, func(c cycleResult) float64 { return float64(c.Lat.P99) })),
				opsLo:   lo, opsHi: hi,
			})
		}
	}
	return out
}

func cycleSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## 1. Uncontended cycle\n\n")
	p("Acquire and release of a fresh name, in a loop, from 1 and 32 goroutines on one client (pool of 36). ")
	p("Time ratio = this implementation's time per cycle ÷ the other's (lower is better; 1.10× is 10%% slower). ")
	p("Round trips are counted by a go-redis hook; Redis CPU/cycle is the server's used CPU (INFO cpu) over the loop ÷ cycles.\n\n")
	ms := cycleMedians(r)
	find := func(im string, par int) *cycleMedian {
		for i := range ms {
			if ms[i].impl == im && ms[i].par == par {
				return &ms[i]
			}
		}
		return nil
	}
	p("| goroutines | implementation | cycles/s (min–max) | p50 | p99 | round trips/cycle | Redis CPU/cycle | time ÷ baseline | tenure's time ÷ this |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range ms {
		base, ten := find("baseline", m.par), find("tenure", m.par)
		vsBase, tenVs := math.NaN(), math.NaN()
		if base != nil {
			vsBase = base.ops / m.ops
		}
		if ten != nil {
			tenVs = m.ops / ten.ops
		}
		p("| %d | %s | %.0f (%.0f–%.0f) | %s | %s | %.2f | %.1fµs | %s | %s |\n", m.par, m.impl, m.ops, m.opsLo, m.opsHi, dur(m.p50), dur(m.p99), m.trips, m.redisUs, ratio(vsBase), ratio(tenVs))
	}
	p("\n![cycle](cycle.png)\n\n")
}

// cyclePlot draws cycles a second, a bar per implementation and
// parallelism.
func cyclePlot(r *results, file string) error {
	ms := cycleMedians(r)
	return groupedBars(file, "Uncontended acquire+release (median over runs)", "cycles/s",
		group(ms, func(m cycleMedian) string { return m.impl }),
		group(ms, func(m cycleMedian) int { return m.par }), "goroutines",
		func(impl string, par int) float64 {
			for _, m := range ms {
				if m.impl == impl && m.par == par {
					return m.ops
				}
			}
			return 0
		})
}
