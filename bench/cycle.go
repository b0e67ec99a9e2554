package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Scenario 1: uncontended acquire + release of distinct names.

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
	impls := []impl{tenureImpl(), redsyncImpl(0), redislockImpl(0), baselineImpl()}
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
